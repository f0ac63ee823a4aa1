"""The fewest running jobs that must end for a domain to hold a gang's members, and what
idles while it is held."""

import numpy as np
import pytest

from batchsched.framework.drain import LEAVING, Running, idle_held, jobs_to_end

# Two domains (bins 0 and 1) of two nodes each; one resource, 4 a node.
BINNED = np.array([0, 0, 1, 1])
DOMAINS = np.array([0, 1])
ONE = np.array([4])


def running(pods: list[tuple[int, int, int]], keys: list[str]) -> Running:
    """`pods`: (node row, job id or LEAVING, request)."""
    return Running(
        rows=np.array([row for row, _, _ in pods]),
        jobs=np.array([job for _, job, _ in pods]),
        vecs=np.array([[request] for _, _, request in pods]),
        keys={key: at for at, key in enumerate(keys)},
        positions={},
    )


def count(
    pods: list[tuple[int, int, int]], keys: list[str], *, own: tuple[str, ...] = ()
) -> list[float]:
    found = running(pods, keys)
    free = 4 - np.bincount(found.rows, found.vecs[:, 0], minlength=4).astype(np.int64)
    counts: list[float] = jobs_to_end(
        found, free[:, None], BINNED, DOMAINS, [(ONE, 2)], own
    ).tolist()
    return counts


def test_the_jobs_whose_room_the_members_need() -> None:
    """Domain 0: job a holds node 0, jobs b and c node 1: all three must end. Domain 1:
    one job d over both nodes."""
    pods = [(0, 0, 4), (1, 1, 2), (1, 2, 2), (2, 3, 4), (3, 3, 4)]
    assert count(pods, ["a", "b", "c", "d"]) == [3, 1]


def test_pods_leaving_free_their_room_with_no_job_ending() -> None:
    pods = [(0, LEAVING, 4), (1, 0, 4), (2, 1, 4), (3, 2, 4)]
    assert count(pods, ["a", "b", "c"]) == [1, 2]


def test_the_gangs_own_members_never_end_for_it() -> None:
    """Domain 0's node 0 runs a member of the gang itself: no job ending frees it."""
    pods = [(0, 0, 4), (2, 1, 4)]
    assert count(pods, ["own", "b"], own=("own",)) == [np.inf, 1]


def test_what_idles_while_held_grows_with_the_jobs_to_end_and_the_room_free_now() -> None:
    """Ready now: nothing idles. One job to end: only the room free now idles (for a
    whole run time). Two, with nothing free: the first job's room, half a run time
    on average (H_2 - 1). No count: last."""
    ends = np.array([0.0, 1.0, 1.0, 2.0, 3.0, np.inf])
    covered = np.array([1.0, 0.75, 0.0, 0.0, 0.5, 0.0])
    idle = idle_held(ends, covered)
    assert idle[:4].tolist() == [0.0, 0.75, 0.0, 0.5]
    assert idle[4] == pytest.approx(1 / 2 + 1 / 3 + 0.5)
    assert idle[5] == np.inf


def test_room_in_deficit_idles_as_none_and_domains_alike_tie() -> None:
    """A domain whose pods ask more than it holds has none free, not less: one job from
    ready, it idles nothing, as little as one ready now. Three jobs from ready with none
    free idles as much as one job with 5/6 free, to the last digit kept."""
    assert idle_held(np.array([0.0, 1.0]), np.array([1.0, -0.5])).tolist() == [0.0, 0.0]
    idle = idle_held(np.array([3.0, 1.0]), np.array([0.0, 5 / 6]))
    assert idle[0] == idle[1]
