"""overcommit: enqueue admits jobs up to idle + (factor - 1) x the cluster, as Volcano's."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config

from tests.support.objects import decide, gang, node

WITH = (
    "tiers:\n- plugins:\n  - {{name: gang}}\n"
    "  - {{name: predicates}}\n  - {{name: overcommit{args}}}\n"
)


def overcommit(args: str = "") -> str:
    return WITH.format(args=f", arguments: {{{args}}}" if args else "")


def cluster(min_cpu: str) -> list[dict[str, object]]:
    return [
        node("n1", cpu="10", memory="16Gi"),
        *gang("g", 2, requests={"cpu": "6"}, minResources={"cpu": min_cpu}),
    ]


@pytest.mark.parametrize(
    ("config", "min_cpu", "phase", "reason"),
    [
        # 10 idle + 20% of 10: a job asking for 11 is admitted, and waits in allocate.
        (overcommit(), "11", "Inqueue", "0/1 nodes are available: 1 Insufficient cpu."),
        (
            overcommit(),
            "13",
            "Pending",
            "minResources needs cpu 13, the cluster has 12 idle with overcommit",
        ),
        (overcommit("overcommit-factor: 1.5"), "15", "Inqueue", None),
        (
            overcommit("overcommit-factor.cpu: 1.0"),
            "11",
            "Pending",
            "the cluster has 10 idle with overcommit",
        ),
        (
            "tiers:\n- plugins: [{name: gang}, {name: predicates}]\n",
            "11",
            "Pending",
            "the cluster has 10 idle",
        ),
    ],
    ids=["default-factor", "beyond-factor", "factor", "per-resource", "without"],
)
def test_admission_beyond_what_is_idle(
    config: str, min_cpu: str, phase: str, reason: str | None
) -> None:
    decisions = decide(cluster(min_cpu), config)
    assert decisions.jobs["default/g"].phase == phase
    if reason is not None:
        assert reason in decisions.pending["default/g-1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("overcommit-factor: 0.5", "overcommit-factor must be a number >= 1, got 0.5"),
        ("overcommit-factor.cpu: yes", "overcommit-factor.cpu must be a number >= 1, got True"),
        (
            "factor: 2",
            "unknown argument 'factor' (allowed: overcommit-factor, overcommit-factor.<resource>)",
        ),
    ],
)
def test_bad_arguments(args: str, message: str) -> None:
    with pytest.raises(
        InvalidObject,
        match="plugin overcommit: "
        + message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)"),
    ):
        load_config(overcommit(args))


def test_enable_job_enqueued_false_turns_it_off() -> None:
    config = overcommit().replace(
        "{name: overcommit}", "{name: overcommit, enableJobEnqueued: false}"
    )
    decisions = decide(cluster("11"), config)
    assert decisions.jobs["default/g"].phase == "Pending"
