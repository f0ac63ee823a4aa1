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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import IntEnum

import numpy as np

from batchsched.api.dra import (
    ALL,
    MAX_CONSUMERS,
    AllocatedDevice,
    ClaimSpec,
    DeviceClass,
    DeviceRequest,
    Devices,
    ExtendedMapping,
    ResourceClaim,
    claim_keys,
    extended_claim,
    extended_resource_classes,
)
from batchsched.api.objects import Task
from batchsched.framework.alike import AlikeNodes
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
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.decisions import Deallocation, DeviceAllocation
from batchsched.model.snapshot import JobInfo, Snapshot, TaskInfo

log = logging.getLogger(__name__)

NOT_CREATED = "ResourceClaim not created yet"
CANNOT_ALLOCATE = "cannot allocate all claims"
# The claim for a pod's extended resources backed by devices is named from the pod:
# `<pod><suffix>` here, the prefix of the name the API server generates for it.
EXTENDED_CLAIM_SUFFIX = "-extended-resources-"
NOT_ON_NODE = "resourceclaim not available on the node"
# Why a pod waits while the claim made for its extended resources at an earlier attempt
# exists (the shell deletes it, as kube-scheduler's PostFilter does).
LEFT_FROM_EARLIER = "is left from an earlier attempt at the pod, and is deleted first"


@dataclass(slots=True)
class _Held:
    """An allocated claim: from the snapshot (status.allocation) or this session."""

    allocation: tuple[AllocatedDevice, ...]
    # Inventory indices of its devices that count as taken (not admin access).
    devices: list[int]
    # Its shares of devices allowing multiple allocations, with what each consumes.
    shares: list[tuple[int, dict[str, Decimal]]]
    where: BoolArray
    users: int
    # Allocated in the snapshot and used by no placed pod: held whatever is evicted.
    anchored: bool
    # Whether its devices count as taken now (not while every user is evicted).
    taken: bool = True


@dataclass(slots=True)
class _Free:
    """The devices an alternative of a request may have (picked, usable, no untolerated
    taint) and, per node, how many of them are free: kept as devices change hands, so
    that counting costs nothing per choice."""

    picked: BoolArray
    eligible: BoolArray
    # Admin access does not take devices: every eligible device counts.
    admin: bool
    counts: IntArray
    # Per node, how many devices are eligible at all; whether some share counters.
    total: IntArray
    consuming: bool


class _Verdict(IntEnum):
    """What the search found on a node for a pod's claims."""

    ALLOCATED = 0
    CANNOT = 1
    # AllocationError: its words name the node's devices.
    ERROR = 2


def _verdict(reason: str | None) -> _Verdict:
    if reason is None:
        return _Verdict.ALLOCATED
    return _Verdict.CANNOT if reason == CANNOT_ALLOCATE else _Verdict.ERROR


@dataclass(frozen=True, slots=True)
class _Special:
    """The claim kube-scheduler makes for a pod's extended resources backed by devices,
    for the nodes that give the same of them through devices (`where`)."""

    where: BoolArray
    pending: Pending
    mappings: tuple[ExtendedMapping, ...]


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
        backed: Mapping[str, str] | None = None,
        allocatable: IntArray | None = None,
        columns: Mapping[str, int] | None = None,
    ) -> None:
        self.devices = devices
        self.inventory = inventory
        self.size = inventory.size
        self.namespace_labels = namespace_labels
        self.unavailable = unavailable
        # Extended resource -> the DeviceClass backing it, and per such resource the
        # nodes without it in allocatable (which give it through devices).
        self.backed = dict(backed or {})
        self._lacking: dict[str, BoolArray] = {
            name: allocatable[:, (columns or {})[name]] == 0
            for name in self.backed
            if allocatable is not None
        }
        self._extended: dict[str, list[_Special] | str] = {}
        # Task key -> the key of its extended-resource claim held in this session.
        self._special: dict[str, str] = {}
        self.usage = Usage(np.zeros(len(inventory.devices), dtype=np.bool_))
        # The inventory's per-device row and counter use as lists, read device by device.
        self._rows: list[int] = inventory.device_row.tolist()
        self._consuming: list[bool] = inventory.consuming.tolist()
        # Devices a free count does not settle: sharing counters, or capacity.
        self._irregular = inventory.consuming | inventory.metered
        self.allocator = Allocator(inventory, self.usage)
        self.held: dict[str, _Held] = {}
        self._resolved: dict[str, _PodClaims | str] = {}
        # Bumped where devices change hands, per node row and for devices reaching
        # several nodes: the searches remembered per node are stale after.
        self.version = np.zeros(self.size, dtype=np.int64)
        self.shared_version = 0
        self._memo: dict[tuple[tuple[str, ...], int], tuple[tuple[int, int], str | None]] = {}
        # The search's verdict per (claims' specs, class of alike nodes), the specs
        # numbered as first seen: see _searched.
        self._specs: dict[tuple[ClaimSpec, ...], int] = {}
        self._verdicts: dict[tuple[int, int], _Verdict] = {}
        # And what it picks there, per claim (request, position in the node's search
        # order), or None: see _chosen.
        self._positions: dict[tuple[int, int], list[list[tuple[str, int]]] | None] = {}
        # Free devices (see _Free) per devices picked, tolerations and admin access:
        # alternatives alike in these but for their count share them.
        self._free: dict[tuple[int, object, bool], _Free] = {}
        # Claim key -> whether counting free devices decides for it (_counted_exactly).
        self._counted: dict[str, bool] = {}
        # Task key -> what its placement allocated, for its binding.
        self.allocated: dict[str, tuple[DeviceAllocation, ...]] = {}
        self._unusable_reach: BoolArray = np.zeros(self.size, dtype=np.bool_)
        # Invalid pools, each with why and the nodes it reaches.
        self._invalid: list[tuple[str, BoolArray]] = []
        for pool, reach in zip(inventory.pools, inventory.pool_counted, strict=True):
            if pool.incomplete or pool.invalid:
                self._unusable_reach |= reach
            if pool.invalid:
                self._invalid.append((pool.invalid, reach))
        self._alike = AlikeNodes(inventory, self.usage.taken, self._unusable_reach)
        # Per node, how many shared counters its pools hold (per pool, set and counter)
        # and the fractions of them consumed, summed: how far its partitionable devices
        # are broken up, which packing reads.
        self.counters_held: IntArray = np.zeros(self.size, dtype=np.int64)
        self.counters_used: FloatArray = np.zeros(self.size)
        for pool, reach in zip(inventory.pools, inventory.pool_reach, strict=True):
            held = sum(1 for c in pool.counters.values() for amount in c.values() if amount > 0)
            self.counters_held[reach] += held
        users: dict[str, int] = {}
        for _, task in placed:
            for key in claim_keys(task):
                users[key] = users.get(key, 0) + 1
        for key, claim in devices.claims.items():
            if claim.allocation is None:
                continue
            found, shares = [], []
            for result in claim.allocation.devices:
                index = inventory.index.get(result.id)
                if result.admin_access or index is None:
                    continue
                if result.share_id:
                    shares.append((index, dict(result.consumed)))
                else:
                    found.append(index)
            count = users.get(key, 0)
            self.held[key] = _Held(
                claim.allocation.devices,
                found,
                shares,
                inventory.terms_mask(claim.allocation.terms),
                users=count,
                anchored=not count,
            )
            self._take(found, shares, +1)

    @staticmethod
    def needed(jobs: Sequence[JobInfo], backed: Mapping[str, str]) -> bool:
        return any(
            t.pod.resource_claims or t.pod.extended_claim or _backed_asks(t.pod, backed)
            for job in jobs
            for t in job.pending
        )

    def concerns(self, task: TaskInfo) -> bool:
        pod = task.pod
        return bool(pod.resource_claims or pod.extended_claim or _backed_asks(pod, self.backed))

    def blocker(self, task: TaskInfo) -> str | None:
        """What the plugin's PreEnqueue and PreFilter find before looking at any node."""
        if not self.concerns(task):
            return None
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return self.unavailable(resolved)
        special = self.extended_of(task)
        return self.unavailable(special) if isinstance(special, str) else None

    # The checks.

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """As every check's, but at once for the usual pod: one claim to allocate with
        one plain request, which a node meets where it has enough free devices."""
        if not self.concerns(task):
            return None
        resolved = self.claims_of(task)
        if (
            isinstance(resolved, str)
            or self.extended_of(task)
            or not self._counted_exactly(resolved.pending)
            or any(key in self.held for key in resolved.keys)
        ):
            return super().mask(task)
        ((alternative, picked, _),) = resolved.pending[0].requests[0].alternatives
        return self.free_count(alternative, picked) >= alternative.count

    def failures(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        if not self.concerns(task):
            return []
        resolved = self.claims_of(task)
        special = self.extended_of(task)
        for failed in (resolved, special):
            if isinstance(failed, str):
                return [(failed, np.ones(self.size, dtype=np.bool_))]
        assert not isinstance(resolved, str) and not isinstance(special, str)
        where: BoolArray = np.ones(self.size, dtype=np.bool_)
        for key in resolved.keys:
            held = self.held.get(key)
            if held is not None:
                where = where & held.where
        checks: list[tuple[str, BoolArray]] = [(NOT_ON_NODE, ~where)]
        pending = tuple(p for p in resolved.pending if p.claim.key not in self.held)
        # Nodes giving none of the pod's extended resources through devices, then those
        # giving the same ones.
        plain = where
        for group in special:
            plain = plain & ~group.where
            checks += self._allocation_failures((*pending, group.pending), where & group.where)
        if pending:
            checks += self._allocation_failures(pending, plain)
        return checks

    def _allocation_failures(
        self, pending: tuple[Pending, ...], where: BoolArray
    ) -> list[tuple[str, BoolArray]]:
        """Where the claims cannot be allocated, by reason: counting free devices rules
        out most nodes at numpy speed; the search settles the rest (_searched)."""
        possible = where & self.enough(pending)
        failing: dict[str, BoolArray] = {}
        cannot: BoolArray = ~possible & where
        if not self._counted_exactly(pending):
            rows = np.flatnonzero(possible)
            failed, error = self._searched(pending, rows)
            if error is not None:
                # Upstream's Filter returns an Error here, which ends the pod's
                # scheduling cycle on every node, not only this one.
                return [(error, where.copy())]
            cannot[rows[failed]] = True
        # A node that cannot allocate and reaches an invalid pool says so, as upstream
        # does: the pool may be what is missing.
        for invalid, reach in self._invalid:
            blamed = cannot & reach
            if blamed.any():
                failing.setdefault(invalid, np.zeros(self.size, dtype=np.bool_))
                failing[invalid] |= blamed
                cannot &= ~blamed
        return [(CANNOT_ALLOCATE, cannot), *failing.items()]

    def _searched(
        self, pending: tuple[Pending, ...], rows: IntArray
    ) -> tuple[BoolArray, str | None]:
        """Which of the rows cannot allocate the claims; or the error of the first row
        that fails with one, as the search node by node in row order would find it. The
        search runs once per class of alike nodes (framework/alike.py) and is
        remembered for those claims' specs: pods asking alike are decided once per
        class, not once per node; the other nodes are searched one by one."""
        keys = tuple(p.claim.key for p in pending)
        classes = self._alike.classes(rows)
        grouped = classes >= 0
        failed: BoolArray = np.zeros(len(rows), dtype=np.bool_)
        # The first row erring (len(rows): none so far), by its index in rows.
        first_error = len(rows)
        if grouped.any():
            specs = self._specs.setdefault(tuple(p.spec for p in pending), len(self._specs))
            at = np.flatnonzero(grouped)
            found, first, inverse = np.unique(classes[at], return_index=True, return_inverse=True)
            verdicts: IntArray = np.empty(len(found), dtype=np.int64)
            for index, (alike, one) in enumerate(zip(found.tolist(), first.tolist(), strict=True)):
                verdict = self._verdicts.get((specs, alike))
                if verdict is None:
                    verdict = _verdict(self._search(keys, pending, int(rows[at[one]])))
                    self._verdicts[(specs, alike)] = verdict
                verdicts[index] = verdict
            per_row = verdicts[np.asarray(inverse).reshape(-1)]
            failed[at] = per_row == _Verdict.CANNOT
            erring = at[per_row == _Verdict.ERROR]
            if len(erring):
                first_error = int(erring[0])
        for index in np.flatnonzero(~grouped).tolist():
            if index > first_error:
                break
            reason = self._search(keys, pending, int(rows[index]))
            if reason == CANNOT_ALLOCATE:
                failed[index] = True
            elif reason is not None:
                return failed, reason
        if first_error < len(rows):
            # Alike nodes err alike, but the words name the node's own device.
            return failed, self._search(keys, pending, int(rows[first_error]))
        return failed, None

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

    def free_count(self, alternative: DeviceRequest, picked: BoolArray) -> IntArray:
        """Per node, how many devices the alternative could have now (not to be changed
        by the caller: it is kept current as devices change hands)."""
        return self._free_of(alternative, picked).counts

    def _free_of(self, alternative: DeviceRequest, picked: BoolArray) -> _Free:
        key = (id(picked), alternative.tolerations, alternative.admin_access)
        found = self._free.get(key)
        if found is None or found.picked is not picked:
            inventory = self.inventory
            eligible = picked & inventory.usable & ~inventory.blocked(alternative)
            admin = alternative.admin_access
            counts = self.per_node(eligible if admin else eligible & ~self.usage.taken)
            total = self.per_node(eligible)
            consuming = bool((eligible & inventory.consuming).any())
            found = self._free[key] = _Free(picked, eligible, admin, counts, total, consuming)
        return found

    def per_node(self, devices: BoolArray) -> IntArray:
        """How many of the devices each node reaches."""
        inventory = self.inventory
        rows = inventory.device_row
        counts: IntArray = np.bincount(rows[devices & (rows >= 0)], minlength=self.size)
        for device in np.flatnonzero(devices & (rows < 0)).tolist():
            counts += inventory.reaches(device)
        return counts

    def _counted_exactly(self, pending: tuple[Pending, ...]) -> bool:
        """Whether counting free devices decides: one claim with one ExactCount request
        and no constraint, over devices that share no counters and all evaluate."""
        if len(pending) != 1:
            return False
        key = pending[0].claim.key
        found = self._counted.get(key)
        if found is None:
            found = self._counted[key] = self._plain(pending[0])
        return found

    def _plain(self, pending: Pending) -> bool:
        if len(pending.requests) != 1 or pending.spec.constraints:
            return False
        alternatives = pending.requests[0].alternatives
        if len(alternatives) != 1:
            return False
        alternative, picked, errors = alternatives[0]
        if alternative.mode == ALL or alternative.admin_access or errors or alternative.capacity:
            return False
        return not (picked & self._irregular).any()

    # What a pod's claims are, as of the snapshot.

    def extended_of(self, task: TaskInfo) -> list[_Special] | str:
        """The claims for the pod's extended resources backed by devices, one per set
        of them that nodes lacking them give (kube-scheduler's filterExtendedResources),
        or why they cannot be allocated anywhere."""
        found = self._extended.get(task.key)
        if found is None:
            found = self._extended[task.key] = self._specials(task.pod)
        return found

    def _specials(self, pod: Task) -> list[_Special] | str:
        asked = _backed_asks(pod, self.backed)
        if not asked:
            return []
        lacking = np.stack([self._lacking[name] for name in asked], axis=1)
        sets, rows = np.unique(lacking, axis=0, return_inverse=True)
        found = []
        for index, given in enumerate(sets.tolist()):
            needed = {
                name: self.backed[name] for name, lacks in zip(asked, given, strict=True) if lacks
            }
            if not needed:
                continue
            spec, mappings = extended_claim(pod.extended, needed)
            claim = ResourceClaim(
                namespace=pod.namespace,
                name=f"{pod.name}{EXTENDED_CLAIM_SUFFIX}",
                uid=f"{pod.uid}{EXTENDED_CLAIM_SUFFIX}",
                spec=spec,
                controller=pod.uid,
            )
            labels = self.namespace_labels.get(pod.namespace, {})
            resolved = resolve_claim(
                claim, self.devices.classes, self.inventory, labels, self.devices.rejected
            )
            if isinstance(resolved, str):
                return resolved
            found.append(_Special(np.asarray(rows).reshape(-1) == index, resolved, mappings))
        return found

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
        key = f"{pod.namespace}/{pod.extended_claim}"
        if pod.extended_claim and key in self.devices.claims:
            if pod.node_name is None:
                # kube-scheduler's Filter refuses a pod whose claim for its extended
                # resources is left from an earlier attempt (even one being deleted),
                # and its PostFilter deletes it. One gone is no longer the pod's: its
                # status may still name it.
                return f"ResourceClaim {key} {LEFT_FROM_EARLIER}"
            keys.append(key)
        return _PodClaims(tuple(keys), tuple(pending))

    # Devices changing hands.

    def _take(
        self, devices: list[int], shares: list[tuple[int, dict[str, Decimal]]], step: int
    ) -> None:
        inventory = self.inventory
        taken = self.usage.taken
        for device in devices:
            was = bool(taken[device])
            self.usage.take(inventory, device, step)
            if bool(taken[device]) != was:
                self._count_free(device, self._rows[device], 1 if was else -1)
            if self._consuming[device]:
                self._count_counters(device, step)
            self._changed(device)
        for device, amounts in shares:
            had = device in self.usage.shares
            self.usage.share(inventory, device, amounts, step)
            # A shared device takes its counters with its first share, and gives them
            # back with its last.
            if self._consuming[device] and had != (device in self.usage.shares):
                self._count_counters(device, step)
            self._changed(device)

    def _changed(self, device: int) -> None:
        row = self._rows[device]
        # Counters are shared across the pool, which may reach other nodes too.
        if row >= 0 and not self._consuming[device]:
            self.version[row] += 1
            self._alike.changed(row)
        else:
            self.shared_version += 1

    def _count_free(self, device: int, row: int, step: int) -> None:
        """The device is taken (step -1) or free again (+1): the free counts that count
        it follow."""
        for free in self._free.values():
            if free.admin or not free.eligible[device]:
                continue
            if row >= 0:
                free.counts[row] += step
            else:
                free.counts += step * self.inventory.reaches(device)

    def _count_counters(self, device: int, step: int) -> None:
        """The device takes (step 1) or gives back (-1) its share of its pool's
        counters, on every node the pool reaches."""
        inventory = self.inventory
        pool_index = inventory.device_pool[device]
        pool = inventory.pools[pool_index]
        share = 0.0
        for counter_set, counters in inventory.devices[device].consumes:
            shared = pool.counters.get(counter_set, {})
            for name, amount in counters:
                capacity = shared.get(name)
                if capacity:
                    share += float(amount / capacity)
        self.counters_used[inventory.pool_reach[pool_index]] += step * share

    def packing(self, task: TaskInfo) -> IntArray | None:
        """Per node, how full (0 to 100 %) the devices the task's claims would take there
        are once they have them, averaged over the requests: plain devices by count,
        partitionable ones by the share of the node's shared counters consumed (a GPU
        already split into partitions is fuller than a whole one). None when the task
        has no claim to allocate. Nodes where the claims cannot be had get some value."""
        if not task.pod.resource_claims:
            return None
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return None
        requests = [r for p in resolved.pending if p.claim.key not in self.held for r in p.requests]
        if not requests:
            return None
        percent = self._fullness(requests[0])
        for request in requests[1:]:
            percent = percent + self._fullness(request)
        return percent // len(requests)

    def _fullness(self, request: Request) -> IntArray:
        """The percentage `packing` gives one request: per node, that of its first
        alternative with enough free devices there (admin access takes none: 0)."""
        found: IntArray = np.zeros(self.size, dtype=np.int64)
        left: BoolArray | None = None
        for alternative, picked, _ in request.alternatives:
            if alternative.admin_access:
                continue
            free = self._free_of(alternative, picked)
            need = free.counts if alternative.mode == ALL else alternative.count
            if free.consuming:
                full = (self.counters_used * 100 / np.maximum(self.counters_held, 1)).astype(
                    np.int64
                )
            else:
                full = (free.total - free.counts + need) * 100 // np.maximum(free.total, 1)
            if len(request.alternatives) == 1:
                return np.asarray(full, dtype=np.int64)
            here = free.counts >= need
            if left is not None:
                here &= left
            found = np.where(here, full, found)
            left = ~here if left is None else left & ~here
        return found

    def allocated_to(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        """The task is placed on `row`: its claims are allocated there, or used again."""
        if not self.concerns(task):
            return
        resolved = self.claims_of(task)
        special = self.extended_of(task)
        if isinstance(resolved, str) or isinstance(special, str):
            return
        for key in resolved.keys:
            held = self.held.get(key)
            if held is None:
                continue
            held.users += 1
            if not held.taken:
                held.taken = True
                self._take(held.devices, held.shares, +1)
        pending = [p for p in resolved.pending if p.claim.key not in self.held]
        extra = next((g for g in special if g.where[row]), None)
        if extra is not None:
            pending.append(extra.pending)
        if not pending:
            return
        chosen = self._first_fit(pending[0], row) if self._counted_exactly(tuple(pending)) else None
        if chosen is None:
            chosen = self._chosen(tuple(pending), row)
        if chosen is None:
            # Only room held for a nomination is taken without asking the filters; the
            # pod is placed afresh (and its claims allocated) when it is bound.
            log.debug("%s: claims not allocated on node row %d", task.key, row)
            return
        made = []
        for claim, devices in zip(pending, chosen, strict=True):
            requests = {a.name: a for r in claim.requests for a, _, _ in r.alternatives}
            allocation = results(self.inventory, claim.claim, devices, requests)
            taken, shares = [], []
            for result, (_, device) in zip(allocation, devices, strict=True):
                if result.admin_access:
                    continue
                if result.share_id:
                    shares.append((device, dict(result.consumed)))
                else:
                    taken.append(device)
            where = self._usable_where([d for _, d in devices])
            self.held[claim.claim.key] = _Held(
                allocation, taken, shares, where, users=1, anchored=False
            )
            self._take(taken, shares, +1)
            terms = node_terms(self.inventory, [d for _, d in devices])
            mappings: tuple[ExtendedMapping, ...] = ()
            spec = None
            if extra is not None and claim is extra.pending:
                self._special[task.key] = claim.claim.key
                mappings, spec = extra.mappings, claim.spec
            made.append(
                DeviceAllocation(
                    claim.claim.namespace, claim.claim.name, allocation, terms, mappings, spec
                )
            )
        self.allocated[task.key] = tuple(made)

    def _chosen(self, pending: tuple[Pending, ...], row: int) -> list[list[tuple[str, int]]] | None:
        """What the search picks on the node (None: nothing). On a node of a class of
        alike nodes it picks the devices at the positions in search order it picked on
        the first node of the class it ran on for these claims' specs."""
        alike = int(self._alike.classes(np.array([row], dtype=np.int64))[0])
        key = (self._specs.setdefault(tuple(p.spec for p in pending), len(self._specs)), alike)
        devices = self.inventory.on_node(row)
        if alike < 0 or key not in self._positions:
            try:
                chosen = self.allocator.allocate(pending, row)
            except AllocationError:
                chosen = None
            if alike < 0:
                return chosen
            at = {device: position for position, device in enumerate(devices)}
            self._positions[key] = (
                None if chosen is None else [[(n, at[d]) for n, d in claim] for claim in chosen]
            )
        positions = self._positions[key]
        if positions is None:
            return None
        return [[(name, devices[p]) for name, p in claim] for claim in positions]

    def _first_fit(self, claim: Pending, row: int) -> list[list[tuple[str, int]]] | None:
        """What the search picks for a lone ExactCount request over plain devices: the
        first free ones on the node, in search order (nothing to backtrack over)."""
        ((alternative, picked, _),) = claim.requests[0].alternatives
        eligible, taken = self._free_of(alternative, picked).eligible, self.usage.taken
        found = [d for d in self.inventory.on_node(row) if eligible[d] and not taken[d]]
        found = found[: alternative.count]
        if len(found) < alternative.count:
            return None
        return [[(alternative.name, d) for d in found]]

    def _usable_where(self, devices: list[int]) -> BoolArray:
        """The nodes that reach every one of the devices."""
        rows = {self._rows[device] for device in devices}
        if len(rows) == 1 and (row := rows.pop()) >= 0:
            where: BoolArray = np.zeros(self.size, dtype=np.bool_)
            where[row] = True
            return where
        where = np.ones(self.size, dtype=np.bool_)
        for device in devices:
            where = where & self.inventory.reaches(device)
        return where

    def idle_allocated(self, task: TaskInfo) -> list[tuple[ResourceClaim, BoolArray]]:
        """The task's claims allocated before the session and reserved for nobody or for
        the task alone, each with the nodes its allocation may be used on: those
        kube-scheduler's PostFilter may deallocate."""
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return []
        found = []
        for key in resolved.keys:
            claim, held = self.devices.claims.get(key), self.held.get(key)
            if claim is None or claim.allocation is None or held is None:
                continue
            if set(claim.reserved_for) <= {task.pod.uid}:
                found.append((claim, held.where))
        return found

    def still_idle(self, deallocation: Deallocation) -> bool:
        """Whether no pod placed by the session uses the claim (it was decided for a
        pod that may have been placed since, or shares it with one)."""
        held = self.held.get(deallocation.key)
        return held is not None and not held.users

    def released_by(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        """The task leaves `row` (its placement undone, or it is evicted): claims no
        placed pod uses any more give their devices back."""
        if not self.concerns(task):
            return
        resolved = self.claims_of(task)
        if isinstance(resolved, str):
            return
        self.allocated.pop(task.key, None)
        made_here = {p.claim.key for p in resolved.pending}
        special = self._special.pop(task.key, None)
        keys = list(resolved.keys)
        if special is not None:
            made_here.add(special)
            keys.append(special)
        for key in keys:
            held = self.held.get(key)
            if held is None:
                continue
            held.users -= 1
            if held.users or held.anchored:
                continue
            if held.taken:
                held.taken = False
                self._take(held.devices, held.shares, -1)
            if key in made_here:
                del self.held[key]


def backed_resources(snapshot: Snapshot) -> dict[str, str]:
    """The extended resources of the snapshot's columns that a DeviceClass backs, each
    with its class."""
    classes = extended_resource_classes(snapshot.devices.classes.values())
    return {name: classes[name] for name in snapshot.resources if name in classes}


def _backed_asks(pod: Task, backed: Mapping[str, str]) -> list[str]:
    """The extended resources backed by devices that the pod asks for, sorted."""
    if not pod.extended or not backed:
        return []
    return sorted(n for n in backed if pod.request.get(n, 0) > 0)


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
            matching = self.claims.per_node(picked & self.inventory.usable)
            free = self.claims.free_count(alternative, picked)
            if int(free.max(initial=0)) >= need:
                return None
            if best is None or int(matching.max(initial=0)) > best[0]:
                best = (int(matching.max(initial=0)), need, alternative)
        assert best is not None
        most, need, alternative = best
        what = f"claim {claim.claim.key}, request {alternative.name}"
        if most >= need:
            row = int(np.argmax(self.claims.per_node(self._picked(alternative, claim))))
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
        return int(self.claims.per_node(picked).max(initial=0))
