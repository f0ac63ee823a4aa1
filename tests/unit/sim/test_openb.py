"""openb CSV rows as the Node and Pod objects a cluster would hold."""

from pathlib import Path

import pytest

from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.api.gpu import GPU_MILLI, GPU_MODEL_LABEL
from batchsched.api.resources import GPU
from batchsched.sim.openb import read_nodes, read_pods

from tests.support.objects import SCHEDULER, decide, placements

NODES = """sn,cpu_milli,memory_mib,gpu,model
n-v100,32000,131072,2,V100M16
n-t4,16000,65536,1,T4
n-cpu,8000,32768,0,
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
whole,4000,8192,2,1000,,LS
share,2000,4096,1,460,,BE
cpu,1000,1024,0,0,,BE
picky,1000,1024,1,1000,V100M32|V100M16|V100M16,LS
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nodes_advertise_cards_both_ways_and_carry_their_model(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    v100, _, cpu_only = nodes
    assert v100["metadata"] == {"name": "n-v100", "labels": {GPU_MODEL_LABEL: "V100M16"}}
    assert v100["status"]["allocatable"] == {
        "cpu": "32000m",
        "memory": "131072Mi",
        GPU: "2",
        GPU_MILLI: "2000",
    }
    assert cpu_only["metadata"]["labels"] == {}
    assert GPU not in cpu_only["status"]["allocatable"]


def test_pods_ask_whole_cards_shares_or_none(tmp_path: Path) -> None:
    pods = read_pods(write(tmp_path, "pods.csv", PODS), scheduler_name=SCHEDULER)
    requests = [p["spec"]["containers"][0]["resources"]["requests"] for p in pods]
    assert requests[0] == {"cpu": "4000m", "memory": "8192Mi", GPU: "2"}
    assert requests[1] == {"cpu": "2000m", "memory": "4096Mi", GPU_MILLI: "460"}
    assert requests[2] == {"cpu": "1000m", "memory": "1024Mi"}
    assert all(p["spec"]["schedulerName"] == SCHEDULER for p in pods)


def test_gpu_spec_becomes_required_affinity_and_is_honoured(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    pods = read_pods(write(tmp_path, "pods.csv", PODS), scheduler_name=SCHEDULER)
    picky = pods[3]
    terms = picky["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": GPU_MODEL_LABEL, "operator": "In", "values": ["V100M16", "V100M32"]}
            ]
        }
    ]
    decisions = decide([*nodes, picky])
    assert placements(decisions) == {"openb/picky": "n-v100"}


@pytest.mark.parametrize(("cards", "milli"), [(2, 500), (1, 1500), (0, 300)])
def test_asks_other_than_whole_cards_or_one_share_are_refused(
    tmp_path: Path, cards: int, milli: int
) -> None:
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"
    path = write(tmp_path, "pods.csv", f"{header}\nx,1,1,{cards},{milli}\n")
    with pytest.raises(InvalidObject, match=f"line 2: num_gpu={cards} with gpu_milli={milli}"):
        read_pods(path, scheduler_name=SCHEDULER)


def test_missing_columns_and_files_are_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="missing column"):
        read_nodes(write(tmp_path, "nodes.csv", "sn,cpu_milli\nx,1\n"))
    with pytest.raises(UnreadableInput, match="cannot read"):
        read_pods(tmp_path / "absent.csv", scheduler_name=SCHEDULER)


def test_bad_numbers_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nx,lots,1,0,\n")
    with pytest.raises(InvalidObject, match="line 2: cpu_milli 'lots' is not a whole number"):
        read_nodes(path)
