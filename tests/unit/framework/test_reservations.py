"""Room held for starving gangs: held room given back is as if never held."""

import numpy as np

from batchsched.framework.reservations import Reservations

from tests.support.objects import node, snapshot_of


def test_room_given_back_leaves_what_other_gangs_hold() -> None:
    snapshot = snapshot_of([node("n1", cpu="4"), node("n2", cpu="4")])
    free = snapshot.allocatable.copy()
    cpu = np.zeros(len(snapshot.column), dtype=np.int64)
    cpu[snapshot.column["cpu"]] = 1000
    reservations = Reservations(snapshot, free)
    reservations.hold("default/a", [0], [2 * cpu])
    alone = (reservations.held.copy(), reservations.ready_at.copy())
    reservations.hold("default/b", [0, 0, 1], [cpu, cpu, cpu])

    assert reservations.release("default/b") == ([0, 0, 1], [cpu, cpu, cpu])
    assert (reservations.held == alone[0]).all()
    assert (reservations.ready_at == alone[1]).all()
    assert reservations.holders == {0: {"default/a": None}}
    assert reservations.release("default/b") is None
