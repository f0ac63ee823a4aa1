"""scheduler-plugins v0.34.7, test/integration/coscheduling_test.go, case by case.

Each case creates its PodGroups, then its pods in the order the test lists them, on the
test's nodes; the test waits for `expectedPods` to be scheduled (TestPodCompleted: for
none of its pods to be). The pods name no scheduler and the profile serving
default-scheduler is the test's (Coscheduling at queueSort, preFilter, postFilter and
permit, with its arguments).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..runner import Case, check, params
from .objects import HIGH, MID, coscheduling_config, node, pod, pod_group

SOURCE = "test/integration/coscheduling_test.go"
NS = "integration-test"
# (name, memory request, priority, PodGroup label or None), in the test's order.
PodRow = tuple[str, int, int, str | None]


def rows(*table: PodRow) -> list[dict[str, object]]:
    return [
        pod(name, NS, {"memory": memory}, priority=priority, group=group)
        for name, memory, priority, group in table
    ]


def plugin_case(
    name: str, groups: list[tuple[str, int, int | None]], pods: list[PodRow], expected: list[str]
) -> Case:
    """A TestCoschedulingPlugin case: one node of 300 bytes of memory and 32 pods;
    PodGroups (name, minMember, minResources memory or None) by util.MakePG."""
    return Case(
        source=SOURCE,
        test="TestCoschedulingPlugin",
        name=name,
        objects=(
            node("fake-node", {"pods": 32, "memory": 300}),
            *(
                pod_group(g, NS, m, min_resources={"memory": r} if r else None)
                for g, m, r in groups
            ),
            *rows(*pods),
        ),
        scheduled=frozenset(f"{NS}/{p}" for p in expected),
        config=coscheduling_config(permitWaitingTimeSeconds=3),
    )


def gang_rows(group: str, prefix: str, count: int, memory: int, priority: int) -> list[PodRow]:
    return [(f"{prefix}-{i}", memory, priority, group) for i in range(1, count + 1)]


def interleave(*lists: list[PodRow]) -> list[PodRow]:
    """The members of several groups created in turn (the "not sequentially" cases)."""
    longest = max(len(members) for members in lists)
    return [members[i] for i in range(longest) for members in lists if i < len(members)]


PLUGIN_CASES = [
    plugin_case(
        "equal priority, sequentially pg1 meet min and pg2 not meet min",
        [("pg1-1", 3, None), ("pg1-2", 4, None)],
        gang_rows("pg1-1", "t1-p1", 3, 50, MID) + gang_rows("pg1-2", "t1-p2", 4, 100, MID),
        ["t1-p1-1", "t1-p1-2", "t1-p1-3"],
    ),
    plugin_case(
        "equal priority, not sequentially pg1 meet min and pg2 not meet min",
        [("pg2-1", 3, None), ("pg2-2", 4, None)],
        interleave(
            gang_rows("pg2-1", "t2-p1", 3, 50, MID), gang_rows("pg2-2", "t2-p2", 4, 100, MID)
        ),
        ["t2-p1-1", "t2-p1-2", "t2-p1-3"],
    ),
    plugin_case(
        "equal priority, not sequentially pg1 not meet min and 3 regular pods",
        [("pg3-1", 4, None)],
        [
            ("t3-p1-1", 50, MID, "pg3-1"),
            ("t3-p2", 100, MID, None),
            ("t3-p1-2", 50, MID, "pg3-1"),
            ("t3-p3", 100, MID, None),
            ("t3-p1-3", 50, MID, "pg3-1"),
        ],
        ["t3-p2", "t3-p3"],
    ),
    plugin_case(
        "different priority, sequentially pg1 meet min and pg2 meet min",
        [("pg4-1", 3, None), ("pg4-2", 3, None)],
        gang_rows("pg4-1", "t4-p1", 3, 100, MID) + gang_rows("pg4-2", "t4-p2", 3, 50, HIGH),
        ["t4-p2-1", "t4-p2-2", "t4-p2-3"],
    ),
    plugin_case(
        "different priority, not sequentially pg1 meet min and pg2 meet min",
        [("pg5-1", 3, None), ("pg5-2", 3, None)],
        interleave(
            gang_rows("pg5-1", "t5-p1", 3, 100, MID), gang_rows("pg5-2", "t5-p2", 3, 50, HIGH)
        ),
        ["t5-p2-1", "t5-p2-2", "t5-p2-3"],
    ),
    plugin_case(
        "different priority, not sequentially pg1 meet min and 3 regular pods",
        [("pg6-1", 3, None)],
        [
            ("t6-p1-1", 50, MID, "pg6-1"),
            ("t6-p2", 100, HIGH, None),
            ("t6-p1-2", 50, MID, "pg6-1"),
            ("t6-p3", 100, HIGH, None),
            ("t6-p1-3", 50, MID, "pg6-1"),
            ("t6-p4", 100, HIGH, None),
        ],
        ["t6-p2", "t6-p3", "t6-p4"],
    ),
    plugin_case(
        "equal priority, not sequentially pg1 meet min and p2 p3 not meet min",
        [("pg7-1", 3, None), ("pg7-2", 4, None), ("pg7-3", 4, None)],
        interleave(
            gang_rows("pg7-1", "t7-p1", 3, 50, MID),
            gang_rows("pg7-2", "t7-p2", 4, 100, MID),
            gang_rows("pg7-3", "t7-p3", 4, 100, MID),
        ),
        ["t7-p1-1", "t7-p1-2", "t7-p1-3"],
    ),
    plugin_case(
        "equal priority, not sequentially pg1 meet min and p2 p3 not meet min, "
        "pgs have min resources",
        [("pg8-1", 3, 150), ("pg8-2", 4, 400), ("pg8-3", 4, 400)],
        interleave(
            gang_rows("pg8-1", "t8-p1", 3, 50, MID),
            gang_rows("pg8-2", "t8-p2", 4, 100, MID),
            gang_rows("pg8-3", "t8-p3", 4, 100, MID),
        ),
        ["t8-p1-1", "t8-p1-2", "t8-p1-3"],
    ),
    plugin_case(
        "equal priority, not sequentially pg1 meet min and pg2 not meet min, "
        "pgs have min resources",
        [("pg9-1", 3, 150), ("pg9-2", 4, 400)],
        interleave(
            gang_rows("pg9-1", "t9-p1", 3, 50, MID), gang_rows("pg9-2", "t9-p2", 4, 100, MID)
        ),
        ["t9-p1-1", "t9-p1-2", "t9-p1-3"],
    ),
]

# TestPodCompleted builds a 6-CPU node but never creates it, so its assertion holds on
# an empty cluster; the node is created here, as the case's name means: the succeeded
# member does not count towards minMember 6, so the five others stay unscheduled.
COMPLETED = Case(
    source=SOURCE,
    test="TestPodCompleted",
    name="pg cannot be scheduled with completed pod",
    objects=(
        node("fake-node-1", {"cpu": 6, "pods": 32}),
        pod_group("pg1-1", NS, 6),
        pod(
            "t1-p1-1",
            NS,
            {"cpu": 1},
            priority=MID,
            group="pg1-1",
            node_name="fake-node-1",
            phase="Succeeded",
        ),
        *(pod(f"t1-p1-{i}", NS, {"cpu": 1}, priority=MID, group="pg1-1") for i in range(2, 7)),
    ),
    unscheduled=frozenset(f"{NS}/t1-p1-{i}" for i in range(2, 7)),
    config=coscheduling_config(permitWaitingTimeSeconds=3, podGroupBackoffSeconds=1),
)

BACKOFF = Case(
    source=SOURCE,
    test="TestPodgroupBackoff",
    name="pg1 can not be scheduled and pg2 can be scheduled",
    objects=(
        node("fake-node-1", {"cpu": 6, "pods": 32}),
        *(node(f"fake-node-{i}", {"cpu": 2, "pods": 32}) for i in (2, 3, 4)),
        pod_group("pg1-1", NS, 6),
        pod_group("pg2-1", NS, 1),
        *(pod(f"t1-p1-{i}", NS, {"cpu": 4}, priority=MID, group="pg1-1") for i in range(1, 7)),
        pod("t1-p2-1", NS, {"cpu": 2}, priority=MID, group="pg2-1"),
    ),
    scheduled=frozenset({f"{NS}/t1-p2-1"}),
    config=coscheduling_config(permitWaitingTimeSeconds=3, podGroupBackoffSeconds=1),
)


@pytest.mark.parametrize("case", params([*PLUGIN_CASES, COMPLETED, BACKOFF]))
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
