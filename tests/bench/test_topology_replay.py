"""The openb replay with racks: its rack rule, its gang rule, and a small replay where a
hard ask keeps every gang in one rack."""

import dataclasses
from pathlib import Path

from batchsched.config.load import read_config
from batchsched.framework.topology import LabelTier
from batchsched.sim import openb

from bench.topology_replay import CONFIG, jobs_of, racked, replay
from bench.topology_workload import RACK_LABEL, SPINE_LABEL

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,32000,131072,8,G2
n1,32000,131072,2,T4
n2,32000,131072,8,G2
n3,32000,131072,8,G2
n4,32000,131072,2,T4
"""
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_rack_rule(tmp_path: Path) -> None:
    """Two nodes a rack, two racks a spine, by model in file order: G2's n0, n2 | n3,
    and T4's n1, n4."""
    nodes = racked(openb.read_nodes(write(tmp_path, "nodes.csv", NODES)), 2, 2)
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    assert {name: found[RACK_LABEL] for name, found in labels.items()} == {
        "n0": "G2-r0",
        "n2": "G2-r0",
        "n3": "G2-r1",
        "n1": "T4-r0",
        "n4": "T4-r0",
    }
    assert {found[SPINE_LABEL] for found in labels.values()} == {"G2-s0", "T4-s0"}


def test_gang_rule(tmp_path: Path) -> None:
    """Pods of one shape join the previous one's gang when created within the window of
    it (p0, p1, p2 chained 30 s apart at window 30), up to the largest gang; another
    shape, or a longer gap, starts a new job."""
    rows = [
        "p0,4000,8192,1,1000,,0",
        "p1,4000,8192,1,1000,,30",
        "q0,2000,8192,1,1000,,30",
        "p2,4000,8192,1,1000,,60",
        "p3,4000,8192,1,1000,,200",
    ]
    trace = write(tmp_path, "pods.csv", HEADER + "\n".join(rows) + "\n")
    members = {
        window: [
            [p["metadata"]["name"] for p in job.pods] for job in jobs_of(trace, "s", window, 16)
        ]
        for window in (0, 30)
    }
    assert members[0] == [["p0"], ["p1"], ["q0"], ["p2"], ["p3"]]
    assert members[30] == [["p0", "p1", "p2"], ["q0"], ["p3"]]
    capped = jobs_of(trace, "s", 30, 2)
    assert [[p["metadata"]["name"] for p in job.pods] for job in capped][:2] == [
        ["p0", "p1"],
        ["q0"],
    ]


def test_a_hard_ask_keeps_the_gang_in_the_rack_that_holds_it(tmp_path: Path) -> None:
    """Racks of one 8-GPU node. Two lone pods of 5 GPUs take n0 and n2, then a gang of
    two 3-GPU pods arrives (seed 1 keeps the trace's order): binpack with no ask splits
    it over the 3 GPUs left on n0 and n2; asking a rack, it takes n3 whole."""
    nodes = racked(openb.read_nodes(write(tmp_path, "nodes.csv", NODES)), 1, 4)
    rows = ["l0,1000,1024,5,1000,G2,0", "l1,1000,1024,5,1000,G2,100"]
    rows += ["g0,1000,1024,3,1000,G2,200", "g1,1000,1024,3,1000,G2,205"]
    trace = write(tmp_path, "pods.csv", HEADER + "\n".join(rows) + "\n")
    config = read_config(str(CONFIG))
    tiers = (LabelTier("rack", RACK_LABEL), LabelTier("spine", SPINE_LABEL))
    config = dataclasses.replace(config, topology_tiers=tiers)
    found = jobs_of(trace, config.scheduler_name, 10, 16)
    assert [len(j.pods) for j in found] == [1, 1, 2]
    spans = {
        ask: replay(nodes, found, config, ask, seed=1, inflate=0.0)["mean_racks"]
        for ask in ("off", "hard")
    }
    assert spans == {"off": 2.0, "hard": 1.0}
