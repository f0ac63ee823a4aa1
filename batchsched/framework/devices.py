"""Structured-parameters allocation of devices, with kube-scheduler's semantics
(k8s.io/dynamic-resource-allocation v0.36, structured/): for one node, every claim of a
pod gets devices or none does.

The search is the upstream one: claims in order, their requests in order (a
firstAvailable request tries its subrequests in order and keeps the first that leads to
a whole solution), devices first-fit in the order of pool, slice name and position,
backtracking when a later request or a constraint cannot be met. The first full
solution wins; there is no scoring.

`Inventory` is what a session reads once: the usable pools, every device, which nodes
reach it, and which devices each request's class and selectors pick. `Allocator` holds
what is in use and answers for one node at a time.
"""

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from operator import attrgetter
from typing import Protocol

import numpy as np

from batchsched.api import cel
from batchsched.api.cel import SelectorCache, Version
from batchsched.api.dra import (
    ADMIN_ACCESS_LABEL,
    ALL,
    MAX_RESULTS,
    AllocatedDevice,
    Attribute,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    Devices,
    DeviceTaintRule,
    NodeScope,
    NodeTerms,
    ResourceClaim,
    ResourceSlice,
    SelectorError,
    with_taint_rules,
)
from batchsched.api.objects import Node
from batchsched.api.selectors import Requirement, node_matches
from batchsched.framework import sharing
from batchsched.model.arrays import BoolArray, IntArray


class SelectorMatcher(Protocol):
    """Evaluates DRA CEL selectors (the `device` variable) on devices."""

    def compile_error(self, expression: str) -> str | None:
        """Why the expression does not compile, or None."""

    def matches(self, expression: str, device: Device) -> bool:
        """Whether the device meets it; raises SelectorError when evaluation fails."""


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    # Why it may not be used: incomplete (being updated) or invalid; None when usable.
    incomplete: bool = False
    invalid: str | None = None
    # Counter set -> counter -> amount the pool's devices share.
    counters: dict[str, dict[str, Decimal]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True)
class Picked:
    """A device chosen for a request: its index in the inventory."""

    request: DeviceRequest
    device: int


@dataclass(frozen=True, slots=True)
class SelectorFailure:
    """A selector that failed on a device (upstream: `CEL runtime error`)."""

    of_class: bool
    owner: str
    index: int
    device: str
    message: str

    def describe(self, claim: str) -> str:
        """upstream's words, naming the claim and request for a claim's selector."""
        owner = self.owner if self.of_class else f"claim {claim}, {self.owner}"
        return (
            f"{owner}: selector #{self.index}: CEL runtime error on device {self.device}: "
            f"{self.message}"
        )


class _Failed(Exception):
    def __init__(self, failure: SelectorFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# Per device of the inventory whether a request picks it, and the failures by device.
Picks = tuple[BoolArray, dict[int, SelectorFailure]]


class Inventory:
    """The devices of the usable pools as of a snapshot, each with the nodes it reaches.

    Per pool, only slices of its highest generation count; a pool with fewer of them
    than resourceSliceCount is incomplete, and one whose slices name a device twice is
    invalid: neither gives devices (nor, for an `All` request, lets the node allocate).
    """

    def __init__(
        self, slices: Iterable[ResourceSlice], nodes: Sequence[Node], matcher: SelectorMatcher
    ) -> None:
        self.matcher = matcher
        self.size = len(nodes)
        self.rows = {node.name: row for row, node in enumerate(nodes)}
        self._nodes = nodes
        latest: dict[tuple[str, str], list[ResourceSlice]] = {}
        for found in slices:
            key = (found.driver, found.pool)
            kept = latest.get(key)
            if kept is None or found.generation > kept[0].generation:
                latest[key] = [found]
            elif found.generation == kept[0].generation:
                kept.append(found)
        self.pools: list[Pool] = []
        self.devices: list[Device] = []
        self.device_pool: list[int] = []
        self.index: dict[str, int] = {}
        # Per pool index, the node rows its devices reach (as a mask) and per device,
        # its own row when it is reachable from one node only (-1 otherwise).
        self.pool_reach: list[BoolArray] = []
        # Per pool, the nodes whose pools count it (for `All` requests, its completeness
        # and validity): where its devices are, or every node for a pool with a slice
        # of shared counters.
        self.pool_counted: list[BoolArray] = []
        device_rows: list[int] = []
        scopes: list[NodeScope] = []
        self._device_reach: dict[int, BoolArray] = {}
        self._masks: dict[object, BoolArray] = {}
        for key in sorted(latest):
            group = sorted(latest[key], key=lambda s: s.name)
            pool = Pool(key[0], key[1], incomplete=len(group) < group[0].slice_count)
            pool_index = len(self.pools)
            self.pools.append(pool)
            reach: BoolArray = np.zeros(self.size, dtype=np.bool_)
            added: BoolArray | None = None
            names: set[str] = set()
            counted_everywhere = False
            for part in group:
                # Upstream counts a slice of shared counters in every node's pools,
                # whatever its node selection: such a pool incomplete or invalid
                # fails `All` requests everywhere.
                counted_everywhere |= bool(part.counters)
                for counter_set, counters in part.counters.items():
                    pool.counters[counter_set] = dict(counters)
                for device in part.devices:
                    if device.name in names:
                        pool.invalid = (
                            f"resource pool {pool.id} is currently invalid: ResourceSlice "
                            f"{part.name}: spec.devices: duplicate device {device.name!r}"
                        )
                    names.add(device.name)
                    scope = device.scope or part.scope
                    if scope is None:
                        continue
                    where = self._reach(scope)
                    # A slice's devices share its scope's one mask: added to the pool's once.
                    if where is not added:
                        reach |= where
                        added = where
                    index = len(self.devices)
                    self.devices.append(device)
                    self.device_pool.append(pool_index)
                    self.index.setdefault(device.id, index)
                    row = self.rows.get(scope.node_name, -1) if scope.node_name else -1
                    device_rows.append(row)
                    scopes.append(scope)
                    if row < 0:
                        self._device_reach[index] = where
            self.pool_reach.append(reach)
            self.pool_counted.append(
                np.ones(self.size, dtype=np.bool_) if counted_everywhere else reach
            )
        self.scopes: list[NodeScope] = scopes
        self.device_row: IntArray = np.array(device_rows, dtype=np.int64)
        self.usable: BoolArray = np.array(
            [
                not (self.pools[p].incomplete or self.pools[p].invalid)
                and not self.devices[d].binding_conditions
                for d, p in enumerate(self.device_pool)
            ],
            dtype=np.bool_,
        )
        # Per node row, its devices in search order; built when first asked.
        self._on_node: dict[int, list[int]] = {}
        # Node-local devices grouped by row: the ones of row r are
        # _by_row[_row_start[r]:_row_start[r + 1]], in inventory order.
        self._by_row = np.argsort(self.device_row, kind="stable")
        self._row_start = np.searchsorted(
            self.device_row[self._by_row], np.arange(self.size + 1), side="left"
        )
        self.tainted: BoolArray = np.array([bool(d.taints) for d in self.devices], dtype=np.bool_)
        self.consuming: BoolArray = np.array(
            [bool(d.consumes) for d in self.devices], dtype=np.bool_
        )
        # Devices whose capacity a request may find too small: shared ones, and those
        # with a requestPolicy (framework/sharing.py).
        self.metered: BoolArray = np.array(
            [d.multiple or bool(d.policies) for d in self.devices], dtype=np.bool_
        )
        self._blocked: dict[DeviceRequest, BoolArray] = {}
        # Per (class selectors, request selectors): where each device matches, and the
        # evaluation errors by device.
        self._picks: dict[object, Picks] = {}
        # Usable devices by kind (see kinds), built when first asked.
        self._kind_first: list[int] = []
        self._kind_of: IntArray | None = None

    def _reach(self, scope: NodeScope) -> BoolArray:
        key: object = scope
        found = self._masks.get(key)
        if found is not None:
            return found
        mask: BoolArray = np.zeros(self.size, dtype=np.bool_)
        if scope.all_nodes:
            mask[:] = True
        elif scope.node_name:
            row = self.rows.get(scope.node_name)
            if row is not None:
                mask[row] = True
        else:
            mask = self.terms_mask(scope.terms)
        self._masks[key] = mask
        return mask

    def terms_mask(self, terms: NodeTerms | None) -> BoolArray:
        """Where node selector terms hold (None: everywhere)."""
        found = self._masks.get(("terms", terms))
        if found is None:
            found = np.array([node_matches(n, terms) for n in self._nodes], dtype=np.bool_)
            self._masks[("terms", terms)] = found
        return found

    def on_node(self, row: int) -> list[int]:
        """The devices the node reaches, in the allocator's search order."""
        found = self._on_node.get(row)
        if found is None:
            local = self._by_row[self._row_start[row] : self._row_start[row + 1]].tolist()
            shared = [d for d, reach in self._device_reach.items() if reach[row]]
            found = sorted(local + shared)
            self._on_node[row] = found
        return found

    def blocked(self, request: DeviceRequest) -> BoolArray:
        """The devices an untolerated taint keeps from the request."""
        found = self._blocked.get(request)
        if found is None:
            found = np.zeros(len(self.devices), dtype=np.bool_)
            for device in np.flatnonzero(self.tainted).tolist():
                found[device] = request.blocked_by(self.devices[device])
            self._blocked[request] = found
        return found

    def reaches(self, device: int) -> BoolArray:
        """The node rows the device reaches."""
        row = int(self.device_row[device])
        if row >= 0:
            return self._only(row)
        return self._device_reach[device]

    def _only(self, row: int) -> BoolArray:
        mask: BoolArray = np.zeros(self.size, dtype=np.bool_)
        mask[row] = True
        return mask

    def pools_on(self, row: int) -> list[Pool]:
        return [pool for p, pool in enumerate(self.pools) if self.pool_counted[p][row]]

    def picks(self, request: DeviceRequest, device_class: DeviceClass) -> Picks:
        """Which devices the class's and the request's selectors pick (the class's first,
        as upstream evaluates them), and why evaluation failed on some devices.
        Evaluated once per session for each kind of device of the usable pools."""
        key = (device_class.name, device_class.selectors, request.name, request.selectors)
        found = self._picks.get(key)
        if found is not None:
            return found
        kinds, kind_of = self.kinds()
        # One slot more, never picked, for the devices of no kind (-1: not usable).
        picked_kind: BoolArray = np.zeros(len(kinds) + 1, dtype=np.bool_)
        failed_kind: dict[int, SelectorFailure] = {}
        for kind, device in enumerate(kinds):
            try:
                picked_kind[kind] = self._selected(device_class, request, self.devices[device])
            except _Failed as failed:
                failed_kind[kind] = failed.failure
        picked: BoolArray = picked_kind[kind_of]
        errors: dict[int, SelectorFailure] = {}
        if failed_kind:
            for index in np.flatnonzero(self.usable).tolist():
                failure = failed_kind.get(int(kind_of[index]))
                if failure is not None:
                    errors[index] = replace(failure, device=self.devices[index].id)
        self._picks[key] = found = (picked, errors)
        return found

    def kinds(self) -> tuple[list[int], IntArray]:
        """The usable devices grouped by what a selector can see of them (all but pool
        and name, which DRA's CEL environment leaves out): one device of each kind, and
        each device's kind (-1: not usable). A cluster's thousands of GPUs are a handful
        of kinds, and a selector is evaluated once per kind."""
        if self._kind_of is None:
            first: dict[Hashable, int] = {}
            kind_of: IntArray = np.full(len(self.devices), -1, dtype=np.int64)
            for index in np.flatnonzero(self.usable).tolist():
                seen = _seen_by_selectors(self.devices[index])
                kind = first.setdefault(seen, len(first))
                if kind == len(self._kind_first):
                    self._kind_first.append(index)
                kind_of[index] = kind
            self._kind_of = kind_of
        return self._kind_first, self._kind_of

    def _selected(self, device_class: DeviceClass, request: DeviceRequest, device: Device) -> bool:
        for of_class, selectors in ((True, device_class.selectors), (False, request.selectors)):
            for i, expression in enumerate(selectors):
                try:
                    if not self.matcher.matches(expression, device):
                        return False
                except SelectorError as error:
                    owner = f"class {device_class.name}" if of_class else f"request {request.name}"
                    raise _Failed(
                        SelectorFailure(of_class, owner, i, device.id, str(error))
                    ) from None
        return True


# Device fields a selector cannot read (DRA's CEL `device` has no pool, name or
# capacity request policy), and the mappings among those it may.
_UNSEEN = {"pool", "name", "policies"}
_MAPPINGS = ("attributes", "capacity")
_OTHER_FIELDS = attrgetter(
    *(f.name for f in fields(Device) if f.name not in {*_UNSEEN, *_MAPPINGS})
)


def _seen_by_selectors(device: Device) -> Hashable:
    """The device's fields but those no selector reads, as one hashable value: devices
    equal in it get equal results from every selector."""
    others: Hashable = _OTHER_FIELDS(device)
    return (tuple(device.attributes.items()), tuple(device.capacity.items()), others)


@dataclass(slots=True)
class Usage:
    """Devices taken (allocated, not for admin access) and counters consumed per pool;
    for devices allowing multiple allocations, their shares and the capacity these
    consume (a shared device takes its counters once, while it has any share)."""

    taken: BoolArray
    consumed: dict[tuple[int, str, str], Decimal] = field(default_factory=dict)
    shares: dict[int, int] = field(default_factory=dict)
    capacity: dict[int, dict[str, Decimal]] = field(default_factory=dict)

    def take(self, inventory: Inventory, device: int, step: int) -> None:
        self.taken[device] = step > 0
        self.count(inventory, device, step)

    def share(
        self, inventory: Inventory, device: int, amounts: Mapping[str, Decimal], step: int
    ) -> None:
        """A share of a device allowing multiple allocations taken (+1) or given back."""
        held = self.shares.get(device, 0) + step
        if held == int(step > 0):
            self.count(inventory, device, step)
        in_use = self.capacity.setdefault(device, {})
        for name, amount in amounts.items():
            in_use[name] = in_use.get(name, Decimal(0)) + amount * step
        if held:
            self.shares[device] = held
        else:
            del self.shares[device]
            del self.capacity[device]

    def count(self, inventory: Inventory, device: int, step: int) -> None:
        """The device's counters consumed (+1) or given back."""
        pool = inventory.device_pool[device]
        for counter_set, counters in inventory.devices[device].consumes:
            for name, amount in counters:
                key = (pool, counter_set, name)
                self.consumed[key] = self.consumed.get(key, Decimal(0)) + amount * step

    def counters_allow(self, inventory: Inventory, device: int) -> bool:
        found = inventory.devices[device]
        if not found.consumes:
            return True
        pool_index = inventory.device_pool[device]
        pool = inventory.pools[pool_index]
        for counter_set, counters in found.consumes:
            shared = pool.counters.get(counter_set, {})
            for name, amount in counters:
                key = (pool_index, counter_set, name)
                if self.consumed.get(key, Decimal(0)) + amount > shared.get(name, Decimal(0)):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class Request:
    """A request of a claim to allocate, resolved against the classes: its alternatives
    (one unless firstAvailable), each with the devices its selectors pick."""

    alternatives: tuple[tuple[DeviceRequest, BoolArray, Mapping[int, SelectorFailure]], ...]


@dataclass(frozen=True, slots=True)
class Pending:
    """A claim to allocate: its requests, resolved."""

    claim: ResourceClaim
    requests: tuple[Request, ...]

    @property
    def spec(self) -> ClaimSpec:
        return self.claim.spec


class AllocationError(Exception):
    """The node cannot allocate the claims for a reason other than devices being taken:
    a selector failing, an `All` request over an incomplete pool (the upstream Error)."""


class Allocator:
    """First-fit search with backtracking over one node's devices."""

    def __init__(self, inventory: Inventory, usage: Usage) -> None:
        self.inventory = inventory
        self.usage = usage

    def allocate(self, claims: Sequence[Pending], row: int) -> list[list[tuple[str, int]]] | None:
        """Per claim, its devices as (result request name, device index); None when the
        node cannot have them all. Raises AllocationError as upstream's Filter errors."""
        search = _Search(self.inventory, self.usage, claims, row)
        return search.run()


class _Search:
    def __init__(
        self, inventory: Inventory, usage: Usage, claims: Sequence[Pending], row: int
    ) -> None:
        self.inventory = inventory
        self.usage = usage
        self.claims = claims
        self.node_devices = inventory.on_node(row)
        self.row = row
        # Devices taken by this search, per claim (admin access may reuse a device
        # another claim took, never one its own claim took).
        self.chosen: list[list[tuple[str, int]]] = [[] for _ in claims]
        self.tentative: dict[int, set[int]] = {}
        # Shares this search took of devices allowing multiple allocations: per device,
        # the capacity they consume, and per (claim, request, device) its own part.
        self.sharing: dict[int, dict[str, Decimal]] = {}
        self.shared: dict[tuple[int, str, int], dict[str, Decimal]] = {}
        # Per claim, per constraint: the values of the devices counted so far.
        self.values: list[list[list[Attribute]]] = [
            [[] for _ in pending.spec.constraints] for pending in claims
        ]
        self._check_all_requests()

    def _check_all_requests(self) -> None:
        alternatives = [a for p in self.claims for r in p.requests for a, _, _ in r.alternatives]
        if all(a.mode != ALL for a in alternatives):
            return
        pools = self.inventory.pools_on(self.row)
        for pending in self.claims:
            for request in pending.requests:
                for alternative, _, _ in request.alternatives:
                    if alternative.mode != ALL:
                        continue
                    for pool in pools:
                        claim = f"claim {pending.claim.key}, request {alternative.name}"
                        if pool.incomplete:
                            raise AllocationError(
                                f"{claim}: asks for all devices, but resource pool "
                                f"{pool.id} is currently being updated"
                            )
                        if pool.invalid:
                            raise AllocationError(
                                f"{claim}: asks for all devices, but {pool.invalid}"
                            )

    def run(self) -> list[list[tuple[str, int]]] | None:
        """The first solution, leaving the usage as it found it (on an error too)."""
        try:
            if not self._claim(0):
                return None
            return [list(chosen) for chosen in self.chosen]
        finally:
            for claim, chosen in enumerate(self.chosen):
                for _, device in reversed(list(chosen)):
                    self._give_back(claim, device)

    def _claim(self, index: int) -> bool:
        if index == len(self.claims):
            return True
        return self._request(index, 0)

    def _request(self, claim: int, request: int) -> bool:
        pending = self.claims[claim]
        if request == len(pending.requests):
            return self._claim(claim + 1)
        for alternative, picked, errors in pending.requests[request].alternatives:
            candidates = self._candidates(pending, alternative, picked, errors)
            if alternative.mode == ALL:
                # Upstream settles what "all" is before this claim takes anything: a
                # device whose capacity is already too small is left out, not missing.
                candidates = [
                    d
                    for d in candidates
                    if not self.inventory.metered[d]
                    or sharing.fits(
                        self.inventory.devices[d], alternative, self.usage.capacity.get(d, {})
                    )
                    is not None
                ]
                if not candidates:
                    continue
                if self._all(claim, request, alternative, candidates):
                    return True
                continue
            if len(self.chosen[claim]) + alternative.count > MAX_RESULTS:
                continue
            if self._some(claim, request, alternative, candidates, alternative.count, 0):
                return True
        return False

    def _candidates(
        self,
        pending: Pending,
        alternative: DeviceRequest,
        picked: BoolArray,
        errors: Mapping[int, SelectorFailure],
    ) -> list[int]:
        found = []
        for device in self.node_devices:
            if device in errors:
                raise AllocationError(errors[device].describe(pending.claim.key))
            if picked[device] and (
                alternative.mode == ALL
                or not alternative.blocked_by(self.inventory.devices[device])
            ):
                found.append(device)
        return found

    def _all(
        self, claim: int, request: int, alternative: DeviceRequest, devices: list[int]
    ) -> bool:
        if len(self.chosen[claim]) + len(devices) > MAX_RESULTS:
            return False
        # Upstream takes every device the selectors pick: one with a taint the request
        # does not tolerate fails the request, it is not left out.
        if any(alternative.blocked_by(self.inventory.devices[d]) for d in devices):
            return False
        added: list[int] = []
        for device in devices:
            if not self._take(claim, alternative, device, must=True):
                for undo in reversed(added):
                    self._give_back(claim, undo)
                return False
            added.append(device)
        if self._request(claim, request + 1):
            return True
        for undo in reversed(added):
            self._give_back(claim, undo)
        return False

    def _some(
        self,
        claim: int,
        request: int,
        alternative: DeviceRequest,
        candidates: list[int],
        left: int,
        start: int,
    ) -> bool:
        if not left:
            return self._request(claim, request + 1)
        # Devices of one request are interchangeable in order: trying them in increasing
        # position alone finds every set once.
        for position in range(start, len(candidates)):
            device = candidates[position]
            if not self._take(claim, alternative, device):
                continue
            if self._some(claim, request, alternative, candidates, left - 1, position + 1):
                return True
            self._give_back(claim, device)
        return False

    def _take(
        self, claim: int, alternative: DeviceRequest, device: int, *, must: bool = False
    ) -> bool:
        """Take the device for the request if it is free and the claim's constraints
        allow it. `must` (an `All` request): a constraint it breaks is an error, as
        a claim that cannot have all its devices makes no sense."""
        holders = self.tentative.get(device, set())
        if alternative.admin_access:
            if claim in holders:
                return False
        elif holders or self.usage.taken[device]:
            return False
        found = self.inventory.devices[device]
        # A shared device that has a share already has its counters.
        counted = found.multiple and (device in self.sharing or device in self.usage.shares)
        if not counted and not self.usage.counters_allow(self.inventory, device):
            return False
        spec = self.claims[claim].spec
        added: list[int] = []
        for c, constraint in enumerate(spec.constraints):
            if not constraint.applies(alternative.name):
                continue
            value = found.attribute(constraint.attribute)
            seen = self.values[claim][c]
            if value is None or (
                (value in seen) if constraint.distinct else (seen and seen[0] != value)
            ):
                for undo in added:
                    self.values[claim][undo].pop()
                if must:
                    raise AllocationError(
                        f"claim {self.claims[claim].claim.key}, request {alternative.name}: "
                        f"cannot add device {found.id} because a claim constraint would not "
                        "be satisfied"
                    )
                return False
            seen.append(value)
            added.append(c)
        amounts: dict[str, Decimal] = {}
        if found.multiple or found.policies or alternative.capacity:
            in_use = dict(self.usage.capacity.get(device, {}))
            for name, amount in self.sharing.get(device, {}).items():
                in_use[name] = in_use.get(name, Decimal(0)) + amount
            fitting = sharing.fits(found, alternative, in_use)
            if fitting is None:
                for undo in added:
                    self.values[claim][undo].pop()
                return False
            amounts = fitting
        self.chosen[claim].append((alternative.name, device))
        if found.multiple:
            self._share(claim, alternative.name, device, amounts, counted=counted)
            return True
        self.tentative.setdefault(device, set()).add(claim)
        if not alternative.admin_access:
            self.usage.take(self.inventory, device, +1)
        return True

    def _share(
        self, claim: int, name: str, device: int, amounts: dict[str, Decimal], *, counted: bool
    ) -> None:
        """A share of a device allowing multiple allocations: never marks it taken."""
        in_use = self.sharing.setdefault(device, {})
        for capacity, amount in amounts.items():
            in_use[capacity] = in_use.get(capacity, Decimal(0)) + amount
        self.shared[(claim, name, device)] = amounts
        if not counted:
            self.usage.count(self.inventory, device, +1)

    def _give_back(self, claim: int, device: int) -> None:
        name, taken = self.chosen[claim].pop()
        assert taken == device
        amounts = self.shared.pop((claim, name, device), None)
        if amounts is not None:
            in_use = self.sharing[device]
            for capacity, amount in amounts.items():
                in_use[capacity] -= amount
            if not any(key[2] == device for key in self.shared):
                del self.sharing[device]
                if device not in self.usage.shares:
                    self.usage.count(self.inventory, device, -1)
        else:
            self.tentative[device].discard(claim)
            if not self._admin(claim, name):
                self.usage.take(self.inventory, device, -1)
        spec = self.claims[claim].spec
        for c, constraint in enumerate(spec.constraints):
            if constraint.applies(name):
                self.values[claim][c].pop()

    def _admin(self, claim: int, name: str) -> bool:
        for request in self.claims[claim].requests:
            for alternative, _, _ in request.alternatives:
                if alternative.name == name:
                    return alternative.admin_access
        return False


def resolve_claim(
    claim: ResourceClaim,
    classes: Mapping[str, DeviceClass],
    inventory: Inventory,
    namespace_labels: Mapping[str, str],
    rejected: Mapping[str, str] | None = None,
) -> Pending | str:
    """The claim's requests with the devices each alternative picks, or why it cannot
    be allocated anywhere: a class that does not exist (or could not be read), a
    selector that does not compile, admin access outside a namespace labelled for it,
    more devices than a claim may hold."""
    spec = claim.spec
    requests = []
    least = 0
    for request in spec.requests:
        alternatives = []
        for alternative in request.alternatives:
            found = classes.get(alternative.class_name)
            if found is None:
                why = (rejected or {}).get(f"DeviceClass {alternative.class_name}")
                return why or (
                    f"request {alternative.name}: device class {alternative.class_name} "
                    "does not exist"
                )
            for owner, selectors in (
                (f"class {found.name}", found.selectors),
                (f"claim {claim.key}, request {alternative.name}", alternative.selectors),
            ):
                for i, expression in enumerate(selectors):
                    error = inventory.matcher.compile_error(expression)
                    if error:
                        return f"{owner}: selector #{i}: CEL compile error: {error}"
            if alternative.admin_access and namespace_labels.get(ADMIN_ACCESS_LABEL) != "true":
                return (
                    f"claim {claim.key}, request {alternative.name}: admin access to devices "
                    f'requires the label {ADMIN_ACCESS_LABEL}: "true" on namespace '
                    f"{claim.namespace}"
                )
            picked, errors = inventory.picks(alternative, found)
            alternatives.append((alternative, picked, errors))
        least += min(1 if a.mode == ALL else a.count for a in request.alternatives)
        requests.append(Request(tuple(alternatives)))
    if least > MAX_RESULTS:
        return (
            f"claim {claim.key}: number of requested devices {least} exceeds the claim limit "
            f"of {MAX_RESULTS}"
        )
    return Pending(claim, tuple(requests))


def node_terms(inventory: Inventory, devices: Iterable[int]) -> NodeTerms | None:
    """status.allocation.nodeSelector, as upstream's createNodeSelector makes it: the
    node's name when a device is local to one, else the requirements of the selectors
    of the devices' slices in one term, else none (usable everywhere)."""
    requirements: list[Requirement] = []
    for index in devices:
        scope = inventory.scopes[index]
        if scope.node_name:
            name = Requirement("metadata.name", "In", (scope.node_name,), field=True)
            return ((name,),)
        for term in scope.terms or ():
            requirements += [r for r in term if r not in requirements]
    return (tuple(requirements),) if requirements else None


def results(
    inventory: Inventory,
    claim: ResourceClaim,
    chosen: Sequence[tuple[str, int]],
    requests: Mapping[str, DeviceRequest],
) -> tuple[AllocatedDevice, ...]:
    """The claim's status.allocation.devices.results for the chosen devices: a share
    of a device allowing multiple allocations has its shareID and the capacity it
    consumes."""
    found = []
    for name, index in chosen:
        device, request = inventory.devices[index], requests[name]
        result = AllocatedDevice(name, device.driver, device.pool, device.name)
        if request.admin_access:
            result = replace(result, admin_access=True)
        if device.multiple:
            amounts = sharing.consumed(device, request) or {}
            result = replace(
                result,
                share_id=sharing.share_id(claim.uid, name, device.id),
                consumed=tuple(sorted(amounts.items())),
            )
        found.append(result)
    return tuple(found)


class CelSelectors:
    """DRA selectors evaluated by api/cel.py, results kept per (expression, device) as
    long as the device is unchanged: across sessions, a cluster's devices are evaluated
    once per selector until their slice changes."""

    def __init__(self) -> None:
        self.cache = SelectorCache()
        # Device id -> the parsed device last seen and how CEL sees it.
        self._seen: dict[str, tuple[Device, cel.Device]] = {}

    def compile_error(self, expression: str) -> str | None:
        compiled = self.cache.compile(expression)
        return compiled.message if isinstance(compiled, cel.CelError) else None

    def matches(self, expression: str, device: Device) -> bool:
        result = self.cache.matches(expression, self._converted(device))
        if isinstance(result, cel.CelError):
            raise SelectorError(result.message)
        return result

    def _converted(self, device: Device) -> cel.Device:
        seen = self._seen.get(device.id)
        if seen is not None and seen[0] is device:
            return seen[1]
        attributes: dict[str, cel.AttributeValue] = {}
        for name, attribute in device.attributes.items():
            value = attribute.value
            if attribute.kind == "version":
                parsed = Version.parse(str(value))
                assert isinstance(parsed, Version), "api/dra.py refuses invalid versions"
                attributes[name] = parsed
            else:
                attributes[name] = value
        # Equal content, equal generation: a slice written again keeps its results.
        generation = hash(
            (
                tuple(sorted(device.attributes.items())),
                tuple(sorted(device.capacity.items())),
                device.multiple,
            )
        )
        converted = cel.Device(
            driver=device.driver,
            pool=device.pool,
            name=device.name,
            generation=generation,
            attributes=attributes,
            capacity=dict(device.capacity),
            allow_multiple_allocations=device.multiple,
        )
        self._seen[device.id] = (device, converted)
        return converted


class InventoryMemo:
    """The last inventory built, reused while the slices, nodes and evaluator are the
    very objects it was built from: an operator's sessions follow each other on a
    cluster whose drivers rarely publish, and building one costs a pass over every
    device and node. What an inventory caches (selector picks, node reach) depends on
    nothing else; what is in use lives apart (Usage)."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        # The objects the key names by identity, kept alive so that no id is reused.
        self._held: tuple[object, ...] = ()
        self._inventory: Inventory | None = None

    def get(
        self, slices: Sequence[ResourceSlice], nodes: Sequence[Node], matcher: SelectorMatcher
    ) -> Inventory:
        key = (id(matcher), *map(id, slices), None, *map(id, nodes))
        if self._inventory is None or key != self._key:
            self._inventory = Inventory(slices, nodes, matcher)
            self._key, self._held = key, (matcher, *slices, *nodes)
        return self._inventory


class TaintedSlices:
    """Slices with the DeviceTaintRules' taints on their devices, each kept while its
    slice and the rules are the very objects it was made from, so that the inventory
    memo still finds the slices it was built from."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[ResourceSlice, tuple[DeviceTaintRule, ...], ResourceSlice]] = {}

    def get(
        self, slices: Mapping[str, ResourceSlice], rules: Mapping[str, DeviceTaintRule]
    ) -> list[ResourceSlice]:
        if not rules:
            return list(slices.values())
        applied = tuple(rules[name] for name in sorted(rules))
        found = []
        made: dict[str, tuple[ResourceSlice, tuple[DeviceTaintRule, ...], ResourceSlice]] = {}
        for key, given in slices.items():
            kept = self._made.get(key)
            if kept is None or kept[0] is not given or kept[1] != applied:
                kept = (given, applied, with_taint_rules(given, applied))
            made[key] = kept
            found.append(kept[2])
        self._made = made
        return found


class DeviceMemo:
    """What device allocation keeps from one session to the next: the CEL evaluator
    with its results, the slices with the DeviceTaintRules' taints, and the last
    inventory. Whoever runs sessions one after another (the operator's loop, the
    simulator) holds one and gives it to each; a session given none starts cold."""

    def __init__(self, selectors: SelectorMatcher | None = None) -> None:
        self.selectors: SelectorMatcher = selectors or CelSelectors()
        self._tainted = TaintedSlices()
        self._inventories = InventoryMemo()

    def inventory(self, devices: Devices, nodes: Sequence[Node]) -> Inventory:
        """The inventory of the slices (tainted by the rules) over the nodes."""
        slices = self._tainted.get(devices.slices, devices.taint_rules)
        return self._inventories.get(slices, nodes, self.selectors)
