"""Pods' ResourceClaims in a session, as kube-scheduler's DynamicResources plugin sees
them (v1.36): devices are a resource like any other.

A pod waits, whatever the session places, while (in kube-scheduler's words where it has
them) a claim is not created yet, does not exist, is being deleted or was made for
another pod, names a DeviceClass that does not exist, has a selector that does not
compile, asks for admin access outside a namespace labelled for it, or asks for more
than 32 devices. A node is ruled out where an allocated claim of the pod cannot be used
(`resourceclaim not available on the node`) or where the pod's unallocated claims cannot
all be allocated (`cannot allocate all claims`, or the allocator's error: a selector
failing on a device, an `All` request over a pool being updated).

Where a pod is placed its unallocated claims are allocated there, and the devices are
taken for the rest of the session; pods sharing a claim follow it. Undoing the placement
(a gang that falls short, framework/statement.py) releases a claim once no placed pod
uses it, and so does evicting a victim (preemption, reclaim): its claims' devices are
free for the preemptor. The allocation goes with the binding (Binding.devices).
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from batchsched.api.dra import (
    ALL,
    MAX_CONSUMERS,
    AllocatedDevice,
    DeviceClass,
    DeviceRequest,
    Devices,
    claim_keys,
)
from batchsched.api.objects import Task
from batchsched.framework.devices import (
    AllocationError,
    Allocator,
    Inventory,
    Pending,
    Request,
    Usage,
    node_terms,
    resolve_claim,
    results,
)
from batchsched.framework.plugin import CheckedFilter
from batchsched.model.arrays import BoolArray
from batchsched.model.decisions import DeviceAllocation
from batchsched.model.snapshot import JobInfo, TaskInfo

log = logging.getLogger(__name__)

NOT_CREATED = "ResourceClaim not created yet"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"


@dataclass(slots=True)
class _Held:
    """An allocated claim: from the snapshot (status.allocation) or this session."""

    allocation: tuple[AllocatedDevice, ...]
    # Inventory indices of its devices that count as taken (not admin access).
    devices: list[int]
    where: BoolArray
    users: int
    # Allocated in the snapshot and used by no placed pod: held whatever is evicted.
    anchored: bool
    # Whether its devices count as taken now (not while every user is evicted).
    taken: bool = True


@dataclass(frozen=True, slots=True)
class _PodClaims:
    """A pod's claims as of the snapshot: the keys of all it uses, and those of them
    to allocate (resolved against the classes)."""

    keys: tuple[str, ...]
    pending: tuple[Pending, ...]


class DeviceClaims(CheckedFilter):
    """The filter, opened by the session when some pending pod has resource claims."""

    name = "DynamicResources"

    def __init__(
        self,
        *,
        devices: Devices,
        inventory: Inventory,
        placed: Sequence[tuple[int, Task]],
        namespace_labels: dict[str, dict[str, str]],
        unavailable: Callable[[str], str],
    ) -> None:
        self.devices = devices
        self.inventory = inventory
        self.size = inventory.size
        self.namespace_labels = namespace_labels
        self.unavailable = unavailable
        self.usage = Usage(np.zeros(len(inventory.devices), dtype=np.bool_))
        self.allocator = Allocator(inventory, self.usage)
        self.held: dict[str, _Held] = {}
        self._resolved: dict[str, _PodClaims | str] = {}
        # Bumped where devices change hands, per node row and for devices reaching
        # several nodes: the searches remembered per node are stale after.
        self.version = np.zeros(self.size, dtype=np.int64)
        self.shared_version = 0
        self._memo: dict[tuple[tuple[str, ...], int], tuple[tuple[int, int], str | None]] = {}
        # Task key -> what its placement allocated, for its binding.
        self.allocated: dict[str, tuple[DeviceAllocation, ...]] = {}
        self._unusable_reach: BoolArray = np.zeros(self.size, dtype=np.bool_)
        # Invalid pools, each with why and the nodes it reaches.
        self._invalid: list[tuple[str, BoolArray]] = []
        for pool, reach in zip(inventory.pools, inventory.pool_reach, strict=True):
            if pool.incomplete or pool.invalid:
                self._unusable_reach |= reach
            if pool.invalid:
                self._invalid.append((pool.invalid, reach))
        users: dict[str, int] = {}
        for _, task in placed:
            for key in claim_keys(task):
                users[key] = users.get(key, 0) + 1
        for key, claim in devices.claims.items():
            if claim.allocation is None:
                continue
            found = [
                index
                for d in claim.allocation.devices
                if not d.admin_access and (index := inventory.index.get(d.id)) is not None
            ]
            count = users.get(key, 0)
            self.held[key] = _Held(
                claim.allocation.devices,
                found,
                inventory.terms_mask(claim.allocation.terms),
                users=count,
                anchored=not count,
            )
            self._take(found, +1)

    @staticmethod
    def needed(jobs: Sequence[JobInfo]) -> bool:
        return any(t.pod.resource_claims for job in jobs for t in job.pending)

    def concerns(self, task: TaskInfo) -> bool:
        return bool(task.pod.resource_claims)

    def blocker(self, task: TaskInfo) -> str | None:
        """What the plugin's PreEnqueue and PreFilter find before looking at any node."""
        if not task.pod.resource_claims:
            return None
        resolved = self.claims_of(task)
        return self.unavailable(resolved) if isinstance(resolved, str) else None

    # The checks.

    def failures(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        if not task.pod.resource_claims:
            return []
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return [(resolved, np.ones(self.size, dtype=np.bool_))]
        where: BoolArray = np.ones(self.size, dtype=np.bool_)
        for key in resolved.keys:
            held = self.held.get(key)
            if held is not None:
                where = where & held.where
        checks: list[tuple[str, BoolArray]] = [(NOT_ON_NODE, ~where)]
        pending = tuple(p for p in resolved.pending if p.claim.key not in self.held)
        if pending:
            checks += self._allocation_failures(pending, where)
        return checks

    def _allocation_failures(
        self, pending: tuple[Pending, ...], where: BoolArray
    ) -> list[tuple[str, BoolArray]]:
        """Where the claims cannot be allocated, by reason: counting free devices rules
        out most nodes at numpy speed; the search settles the rest, remembered per node
        until devices there change hands."""
        possible = where & self.enough(pending)
        failing: dict[str, BoolArray] = {}
        cannot: BoolArray = ~possible & where
        if not self._counted_exactly(pending):
            keys = tuple(p.claim.key for p in pending)
            for row in np.flatnonzero(possible).tolist():
                reason = self._search(keys, pending, row)
                if reason is None:
                    continue
                if reason == CANNOT_ALLOCATE:
                    cannot[row] = True
                    continue
                # Upstream's Filter returns an Error here, which ends the pod's
                # scheduling cycle on every node, not only this one.
                return [(reason, where.copy())]
        # A node that cannot allocate and reaches an invalid pool says so, as upstream
        # does: the pool may be what is missing.
        for invalid, reach in self._invalid:
            blamed = cannot & reach
            if blamed.any():
                failing.setdefault(invalid, np.zeros(self.size, dtype=np.bool_))
                failing[invalid] |= blamed
                cannot &= ~blamed
        return [(CANNOT_ALLOCATE, cannot), *failing.items()]

    def _search(self, keys: tuple[str, ...], pending: tuple[Pending, ...], row: int) -> str | None:
        stamp = (int(self.version[row]), self.shared_version)
        remembered = self._memo.get((keys, row))
        if remembered is not None and remembered[0] == stamp:
            return remembered[1]
        try:
            reason = None if self.allocator.allocate(pending, row) is not None else CANNOT_ALLOCATE
        except AllocationError as error:
            reason = str(error)
        self._memo[(keys, row)] = (stamp, reason)
        return reason

    def enough(self, pending: tuple[Pending, ...]) -> BoolArray:
        """Where each request has as many free devices as it needs, other requests
        aside: necessary, and for a lone request of plain devices sufficient."""
        ok: BoolArray = np.ones(self.size, dtype=np.bool_)
        for claim in pending:
            for request in claim.requests:
                some: BoolArray = np.zeros(self.size, dtype=np.bool_)
                for alternative, picked, errors in request.alternatives:
                    need = 1 if alternative.mode == ALL else alternative.count
                    free = self.free_count(alternative, picked)
                    some |= free >= need
                    # Left to the search, which says why: a selector failing on a
                    # device, an `All` request over a pool not usable.
                    for device in errors:
                        some |= self.inventory.reaches(device)
                    if alternative.mode == ALL:
                        some |= self._unusable_reach
                ok &= some
        return ok

    def free_count(self, alternative: DeviceRequest, picked: BoolArray) -> np.ndarray:
        inventory = self.inventory
        usable = picked & inventory.usable & ~inventory.blocked(alternative)
        if not alternative.admin_access:
            usable = usable & ~self.usage.taken
        rows = inventory.device_row
        counts = np.bincount(rows[usable & (rows >= 0)], minlength=self.size)
        for device in np.flatnonzero(usable & (rows < 0)).tolist():
            counts = counts + inventory.reaches(device)
        return counts

    def _counted_exactly(self, pending: tuple[Pending, ...]) -> bool:
        """Whether counting free devices decides: one claim with one ExactCount request
        and no constraint, over devices that share no counters and all evaluate."""
        if len(pending) != 1 or len(pending[0].requests) != 1 or pending[0].spec.constraints:
            return False
        alternatives = pending[0].requests[0].alternatives
        if len(alternatives) != 1:
            return False
        alternative, picked, errors = alternatives[0]
        if alternative.mode == ALL or alternative.admin_access or errors:
            return False
        return not (picked & self.inventory.consuming).any()

    # What a pod's claims are, as of the snapshot.

    def claims_of(self, task: TaskInfo) -> _PodClaims | str:
        resolved = self._resolved.get(task.key)
        if resolved is None:
            resolved = self._resolved[task.key] = self._resolve(task.pod)
        return resolved

    def _resolve(self, pod: Task) -> _PodClaims | str:
        keys: list[str] = []
        pending: list[Pending] = []
        for ref in pod.resource_claims:
            if ref.claim is None:
                continue
            if not ref.claim:
                return f"pod {pod.key}: spec.resourceClaims[{ref.name}]: {NOT_CREATED}"
            key = f"{pod.namespace}/{ref.claim}"
            claim = self.devices.claims.get(key)
            if claim is None:
                rejection = self.devices.rejected.get(f"ResourceClaim {key}")
                return rejection or f'resourceclaim "{ref.claim}" not found'
            if claim.deleting:
                return f'resourceclaim "{claim.name}" is being deleted'
            if ref.template and claim.controller != pod.uid:
                return f"ResourceClaim {key} was not created for Pod {pod.key} (Pod is not owner)"
            keys.append(key)
            if claim.allocation is not None:
                full = len(claim.reserved_for) >= MAX_CONSUMERS
                if full and pod.uid not in claim.reserved_for:
                    return "resourceclaim in use"
                continue
            labels = self.namespace_labels.get(pod.namespace, {})
            found = resolve_claim(
                claim, self.devices.classes, self.inventory, labels, self.devices.rejected
            )
            if isinstance(found, str):
                return found
            pending.append(found)
        return _PodClaims(tuple(keys), tuple(pending))

    # Devices changing hands.

    def _take(self, devices: list[int], step: int) -> None:
        inventory = self.inventory
        for device in devices:
            self.usage.take(inventory, device, step)
            row = int(inventory.device_row[device])
            # Counters are shared across the pool, which may reach other nodes too.
            if row >= 0 and not inventory.consuming[device]:
                self.version[row] += 1
            else:
                self.shared_version += 1

    def allocated_to(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        """The task is placed on `row`: its claims are allocated there, or used again."""
        if not task.pod.resource_claims:
            return
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return
        for key in resolved.keys:
            held = self.held.get(key)
            if held is None:
                continue
            held.users += 1
            if not held.taken:
                held.taken = True
                self._take(held.devices, +1)
        pending = [p for p in resolved.pending if p.claim.key not in self.held]
        if not pending:
            return
        chosen = self._first_fit(pending[0], row) if self._counted_exactly(tuple(pending)) else None
        if chosen is None:
            try:
                chosen = self.allocator.allocate(pending, row)
            except AllocationError:
                chosen = None
        if chosen is None:
            # Only room held for a nomination is taken without asking the filters; the
            # pod is placed afresh (and its claims allocated) when it is bound.
            log.debug("%s: claims not allocated on node row %d", task.key, row)
            return
        made = []
        for claim, devices in zip(pending, chosen, strict=True):
            admin = {a.name: a.admin_access for r in claim.requests for a, _, _ in r.alternatives}
            allocation = results(self.inventory, devices, admin)
            taken = [d for name, d in devices if not admin[name]]
            where = self._usable_where([d for _, d in devices])
            self.held[claim.claim.key] = _Held(allocation, taken, where, users=1, anchored=False)
            self._take(taken, +1)
            terms = node_terms(self.inventory, [d for _, d in devices])
            made.append(
                DeviceAllocation(claim.claim.namespace, claim.claim.name, allocation, terms)
            )
        self.allocated[task.key] = tuple(made)

    def _first_fit(self, claim: Pending, row: int) -> list[list[tuple[str, int]]] | None:
        """What the search picks for a lone ExactCount request over plain devices: the
        first free ones on the node, in search order (nothing to backtrack over)."""
        ((alternative, picked, _),) = claim.requests[0].alternatives
        inventory = self.inventory
        free = picked & inventory.usable & ~inventory.blocked(alternative) & ~self.usage.taken
        found = [d for d in inventory.on_node(row) if free[d]][: alternative.count]
        if len(found) < alternative.count:
            return None
        return [[(alternative.name, d) for d in found]]

    def _usable_where(self, devices: list[int]) -> BoolArray:
        """The nodes that reach every one of the devices."""
        rows = self.inventory.device_row[devices]
        if len(rows) and (rows == rows[0]).all() and rows[0] >= 0:
            where: BoolArray = np.zeros(self.size, dtype=np.bool_)
            where[rows[0]] = True
            return where
        where = np.ones(self.size, dtype=np.bool_)
        for device in devices:
            where = where & self.inventory.reaches(device)
        return where

    def released_by(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        """The task leaves `row` (its placement undone, or it is evicted): claims no
        placed pod uses any more give their devices back."""
        if not task.pod.resource_claims:
            return
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return
        self.allocated.pop(task.key, None)
        made_here = {p.claim.key for p in resolved.pending}
        for key in resolved.keys:
            held = self.held.get(key)
            if held is None:
                continue
            held.users -= 1
            if held.users or held.anchored:
                continue
            if held.taken:
                held.taken = False
                self._take(held.devices, -1)
            if key in made_here:
                del self.held[key]


class Diagnosis:
    """Which request, selector or constraint of a pod's claims no node can meet, and
    which node came closest: what `explain` says beyond kube-scheduler's words."""

    def __init__(self, claims: DeviceClaims, nodes: Sequence[str]) -> None:
        self.claims = claims
        self.inventory = claims.inventory
        self.nodes = nodes

    def of(self, task: TaskInfo) -> tuple[str, str] | None:
        """(cause, remedy), or None when its claims do not keep it from every node."""
        resolved = self.claims.claims_of(task)
        if isinstance(resolved, str):
            return None
        pending = tuple(p for p in resolved.pending if p.claim.key not in self.claims.held)
        if not pending:
            return None
        for claim in pending:
            for request in claim.requests:
                found = self._request(claim, request)
                if found is not None:
                    return found
        return self._constraints(pending)

    def _request(self, claim: Pending, request: Request) -> tuple[str, str] | None:
        """The request when none of its alternatives has enough devices on any node."""
        best: tuple[int, int, DeviceRequest] | None = None
        for alternative, picked, _ in request.alternatives:
            need = 1 if alternative.mode == ALL else alternative.count
            matching = self._per_node(picked & self.inventory.usable)
            free = self.claims.free_count(alternative, picked)
            if int(free.max(initial=0)) >= need:
                return None
            if best is None or int(matching.max(initial=0)) > best[0]:
                best = (int(matching.max(initial=0)), need, alternative)
        assert best is not None
        most, need, alternative = best
        what = f"claim {claim.claim.key}, request {alternative.name}"
        if most >= need:
            row = int(np.argmax(self._per_node(self._picked(alternative, claim))))
            return (
                f"{what}: every node with {need} matching device(s) has them taken "
                f"(closest: node {self.nodes[row]})",
                "it is placed once the claims holding them are released; a higher "
                "priority lets it preempt their pods",
            )
        return self._selector(what, alternative, need, most)

    def _selector(
        self, what: str, alternative: DeviceRequest, need: int, most: int
    ) -> tuple[str, str]:
        """Name the selector that leaves too few devices on every node."""
        device_class = self.claims.devices.classes[alternative.class_name]
        plain = DeviceRequest(alternative.name, alternative.class_name)
        of_class = self._most(plain, device_class)
        if of_class < need:
            return (
                f"{what}: no node has {need} device(s) of class {device_class.name} "
                f"(at most {of_class} on one node)",
                f"ask for fewer devices, or check DeviceClass {device_class.name}'s selectors",
            )
        for i in range(len(alternative.selectors)):
            narrowed = DeviceRequest(
                alternative.name, alternative.class_name, alternative.selectors[: i + 1]
            )
            if self._most(narrowed, device_class) < need:
                return (
                    f"{what}: selector #{i} ({alternative.selectors[i]}) leaves fewer than "
                    f"{need} device(s) of class {device_class.name} on every node "
                    f"(at most {most})",
                    "relax the selector, or ask for fewer devices",
                )
        return (
            f"{what}: untolerated device taints leave fewer than {need} device(s) on every "
            f"node (at most {most})",
            "add a toleration to the request, or remove the taint",
        )

    def _constraints(self, pending: tuple[Pending, ...]) -> tuple[str, str] | None:
        """The constraint without which some node could allocate the claims."""
        possible = self.claims.enough(pending)
        for index, claim in enumerate(pending):
            for c, constraint in enumerate(claim.spec.constraints):
                kept = tuple(x for j, x in enumerate(claim.spec.constraints) if j != c)
                relaxed = replace(claim.claim, spec=replace(claim.spec, constraints=kept))
                trial = (*pending[:index], Pending(relaxed, claim.requests), *pending[index + 1 :])
                for row in np.flatnonzero(possible).tolist():
                    try:
                        found = self.claims.allocator.allocate(trial, row)
                    except AllocationError:
                        continue
                    if found is not None:
                        kind = "distinctAttribute" if constraint.distinct else "matchAttribute"
                        return (
                            f"claim {claim.claim.key}: constraint #{c} ({kind} "
                            f"{constraint.attribute}) cannot hold with the devices free on "
                            f"any node (closest: node {self.nodes[row]})",
                            "relax the constraint, or wait for devices that share it to be "
                            "released",
                        )
        return None

    def _picked(self, alternative: DeviceRequest, claim: Pending) -> BoolArray:
        for request in claim.requests:
            for found, picked, _ in request.alternatives:
                if found is alternative:
                    return picked & self.inventory.usable
        return np.zeros(len(self.inventory.devices), dtype=np.bool_)

    def _most(self, request: DeviceRequest, device_class: DeviceClass) -> int:
        picked, _ = self.inventory.picks(request, device_class)
        picked = picked & self.inventory.usable & ~self.inventory.blocked(request)
        return int(self._per_node(picked).max(initial=0))

    def _per_node(self, devices: BoolArray) -> np.ndarray:
        rows = self.inventory.device_row
        counts = np.bincount(rows[devices & (rows >= 0)], minlength=self.inventory.size)
        for device in np.flatnonzero(devices & (rows < 0)).tolist():
            counts = counts + self.inventory.reaches(device)
        return counts
