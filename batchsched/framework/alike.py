"""Nodes the device search must answer alike for: the search's answer for a pod's claims
on a node depends on the node's devices only through what selectors and constraints see
of them (their kind, Inventory.kinds) and whether each is taken, in search order. Where
every device of a node is its own, takes no shared counters and has no capacity to meter,
and every pool the node counts is usable, nothing else enters: such nodes equal in
kinds and taken devices are one class, and a claim's search on one of them settles the
class (framework/deviceclaims.py). A 1,000-node cluster of one GPU model is a handful of
classes, however many pods ask with constraints."""

import numpy as np

from batchsched.framework.devices import Inventory
from batchsched.model.arrays import BoolArray, IntArray


class AlikeNodes:
    """Per node row its class (-1: the node's answer is its own), kept as devices change
    hands."""

    def __init__(self, inventory: Inventory, taken: BoolArray, unusable: BoolArray) -> None:
        """`taken`: the devices taken, kept current by the caller; `unusable`: the nodes
        counting a pool that is incomplete or invalid (an `All` request fails there)."""
        self.inventory = inventory
        self._taken = taken
        _, kind_of = inventory.kinds()
        self._kind_of: list[int] = kind_of.tolist()
        rows = inventory.device_row
        local = rows >= 0
        odd = local & (inventory.consuming | inventory.metered)
        own: BoolArray = np.bincount(rows[odd], minlength=inventory.size) == 0
        for device in np.flatnonzero(~local).tolist():
            own &= ~inventory.reaches(device)
        self.eligible: BoolArray = own & ~unusable
        self._stale: BoolArray = self.eligible.copy()
        self._class: IntArray = np.full(inventory.size, -1, dtype=np.int64)
        # Signature (per device in search order: kind, taken) -> class.
        self._ids: dict[tuple[int, ...], int] = {}

    def changed(self, row: int) -> None:
        """A device of the node changed hands."""
        self._stale[row] = self.eligible[row]

    def classes(self, rows: IntArray) -> IntArray:
        """The class of each of the rows (-1: not grouped)."""
        stale = rows[self._stale[rows]]
        if len(stale):
            kind_of, taken, ids = self._kind_of, self._taken, self._ids
            for row in stale.tolist():
                devices = self.inventory.on_node(row)
                signature = tuple(2 * kind_of[d] + int(taken[d]) for d in devices)
                self._class[row] = ids.setdefault(signature, len(ids))
            self._stale[stale] = False
        return self._class[rows]
