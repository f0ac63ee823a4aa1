"""Pods' PersistentVolumeClaims, as kube-scheduler's VolumeRestrictions, NodeVolumeLimits,
VolumeBinding and VolumeZone filters see them (v1.36).

A pod waits, whatever the session places, while (in kube-scheduler's words):
- a claim does not exist, is lost or is being deleted, or an ephemeral claim is not its own;
- a claim is unbound and its class binds at once (Immediate): the PV controller binds it;
- a ReadWriteOncePod claim is used by a pod already on a node.
A node is ruled out, with the reason of the first check it fails, when:
- a ReadWriteOncePod claim of the pod went to a pod placed earlier in the session;
- the pod's new CSI volumes would pass the driver's attach limit in the node's CSINode;
- a bound claim's volume is gone, or its node affinity does not match the node;
- an unbound claim of a WaitForFirstConsumer class can have no volume there: it was
  promised to another node, or no available volume of its class fits it and the node,
  and the class cannot provision one for the node (no provisioner, allowedTopologies,
  or, for a CSI driver with storageCapacity, no CSIStorageCapacity with room for it);
- a bound volume's zone or region labels differ from the node's.

Where a pod is placed, each unbound claim gets the smallest available volume that fits
(kube-scheduler's choice), or is to be provisioned for that node; the choice goes with
the binding (Binding.claims) and holds for the rest of the session, so no two claims
get one volume and pods sharing a claim follow it. The checks depend on what is placed
anywhere, so they are asked afresh at each choice; sessions where no pending pod mounts
a claim open nothing.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from batchsched.api.objects import Node
from batchsched.api.selectors import node_matches
from batchsched.api.volumes import (
    NO_PROVISIONER,
    READ_WRITE_ONCE_POD,
    ZONE_LABELS,
    Claim,
    NodeTerms,
    PodClaim,
    StorageClass,
    Volume,
)
from batchsched.framework.plugin import CheckedFilter
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.decisions import ClaimBinding
from batchsched.model.snapshot import JobInfo, TaskInfo

IMMEDIATE_UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
VOLUME_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ZONE_CONFLICT = "node(s) had no available volume zone"


@dataclass(frozen=True, slots=True)
class _Claims:
    """A pod's claims as of the snapshot, sorted by how they get their volume."""

    bound: tuple[tuple[Claim, Volume | None], ...]
    # Unbound, WaitForFirstConsumer: their volume is found where the pod goes.
    delayed: tuple[Claim, ...]
    # Keys of its ReadWriteOncePod claims named in the spec (not ephemeral ones).
    exclusive: tuple[str, ...]
    # CSI volumes it would attach, as (unique id, driver).
    attaches: tuple[tuple[str, str], ...]


class VolumeBinding(CheckedFilter):
    """The filter; opened by the predicates plugin in sessions where a pending pod
    mounts a claim."""

    name = "VolumeBinding"

    def __init__(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        self.storage = snapshot.storage
        self.nodes: list[Node] = snapshot.nodes
        self.rows = {node.name: row for row, node in enumerate(self.nodes)}
        self.size = len(self.nodes)
        self._resolved: dict[str, _Claims | str] = {}
        self._masks: dict[object, BoolArray] = {}
        self._by_class: dict[str, list[Volume]] = defaultdict(list)
        for volume in self.storage.volumes.values():
            self._by_class[volume.storage_class].append(volume)
        # Claim key -> pods on a node (bound, or placed in this session) that mount it;
        # `bound_users` counts the bound ones alone.
        self.users: Counter[str] = Counter()
        # Unbound claims given a volume in this session: key -> (node row, volume or
        # "" to provision), and how many placed pods rely on that.
        self.decided: dict[str, tuple[int, str]] = {}
        self.relying: Counter[str] = Counter()
        # Per node row: attached CSI volume id -> pods using it; per driver, how many
        # distinct volumes each node has attached; per volume id, the rows holding it.
        self.limits = self._attach_limits()
        self.attached: dict[int, Counter[str]] = defaultdict(Counter)
        self.attached_count: dict[str, IntArray] = {
            driver: np.zeros(self.size, dtype=np.int64) for driver in self.limits
        }
        self.holders: dict[str, set[int]] = defaultdict(set)
        for row, task in snapshot.placed:
            if task.claims:
                self._count(task.namespace, task.claims, row, +1)
        self.bound_users = self.users.copy()
        session.blockers.append(self.blocker)
        session.fresh_filters.append(self)
        session.on_allocate.append(self._allocated)
        session.on_deallocate.append(self._deallocated)

    @staticmethod
    def needed(session: Session) -> bool:
        return any(t.pod.claims for job in session.placing for t in job.pending)

    def blocker(self, task: TaskInfo) -> str | None:
        """What kube-scheduler's volume plugins find before looking at any node."""
        if not task.pod.claims:
            return None
        claims = self._claims(task)
        if isinstance(claims, str):
            return self.session.unavailable(claims)
        if any(self.bound_users[key] for key in claims.exclusive):
            return self.session.unavailable(READ_WRITE_ONCE_POD_CONFLICT)
        return None

    def concerns(self, task: TaskInfo) -> bool:
        return bool(task.pod.claims)

    # The checks, each as the nodes it rules out.

    def failures(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        if not task.pod.claims:
            return []
        claims = self._claims(task)
        if isinstance(claims, str):
            return [(claims, np.ones(self.size, dtype=np.bool_))]
        checks: list[tuple[str, BoolArray]] = []
        if any(self.users[key] for key in claims.exclusive):
            checks.append((READ_WRITE_ONCE_POD_CONFLICT, np.ones(self.size, dtype=np.bool_)))
        if claims.attaches and self.limits:
            checks.append((MAX_VOLUME_COUNT, self._over_limit(claims.attaches)))
        missing = any(volume is None for _, volume in claims.bound)
        if missing:
            checks.append((VOLUME_MISSING, np.ones(self.size, dtype=np.bool_)))
        affinity = self._everywhere()
        for _, volume in claims.bound:
            if volume is not None:
                affinity = affinity & self._affinity(volume.node_affinity)
        checks.append((NODE_CONFLICT, ~affinity))
        if claims.delayed:
            checks.append((BIND_CONFLICT, ~self._bindable(claims.delayed, sized=False)))
            if any(self._sized(claim) for claim in claims.delayed):
                checks.append((NOT_ENOUGH_SPACE, ~self._bindable(claims.delayed, sized=True)))
        zones = self._everywhere()
        for _, volume in claims.bound:
            if volume is not None:
                zones = zones & self._zone(volume)
        checks.append((ZONE_CONFLICT, ~zones))
        return checks

    def _over_limit(self, attaches: tuple[tuple[str, str], ...]) -> BoolArray:
        over: BoolArray = np.zeros(self.size, dtype=np.bool_)
        for driver, limit in self.limits.items():
            ids = [volume_id for volume_id, d in attaches if d == driver]
            if not ids:
                continue
            new = np.full(self.size, len(ids), dtype=np.int64)
            for volume_id in ids:
                held = self.holders.get(volume_id)
                if held:
                    new[list(held)] -= 1
            # A node already past its limit still takes a pod that attaches nothing new
            # there: kube-scheduler checks only the drivers the pod adds volumes of.
            over |= (limit >= 0) & (new > 0) & (self.attached_count[driver] + new > limit)
        return over

    def _bindable(self, delayed: tuple[Claim, ...], *, sized: bool) -> BoolArray:
        """Where every unbound WaitForFirstConsumer claim can have a volume; `sized`:
        counting the room the CSI drivers report for volumes to be provisioned."""
        ok = self._everywhere()
        open_claims = []
        for claim in delayed:
            decided = self.decided.get(claim.key)
            if decided is not None:
                row, volume = decided
                ok = ok & (
                    self._affinity(self.storage.volumes[volume].node_affinity)
                    if volume
                    else self._only(row)
                )
            elif claim.selected_node is not None:
                ok = ok & self._only(self.rows.get(claim.selected_node))
            else:
                open_claims.append(claim)
        if not open_claims:
            return ok
        candidates = [self._candidates(claim) for claim in open_claims]
        names = [{volume.name for volume in found} for found in candidates]
        shared = any(names[i] & names[j] for i in range(len(names)) for j in range(i))
        if not shared:
            for claim, found in zip(open_claims, candidates, strict=True):
                ok = ok & (self._static(claim, found) | self._provisionable(claim, sized=sized))
            return ok
        # Claims of one pod compete for the same volumes: match them node by node, as
        # kube-scheduler does, where any of those volumes could be.
        somewhere: BoolArray = np.zeros(self.size, dtype=np.bool_)
        provisioned = ok.copy()
        for claim, found in zip(open_claims, candidates, strict=True):
            somewhere |= self._static(claim, found)
            provisioned &= self._provisionable(claim, sized=sized)
        result = provisioned & ~somewhere
        for row in np.flatnonzero(ok & somewhere).tolist():
            result[row] = self._choose(open_claims, row, sized=sized) is not None
        return result

    def _static(self, claim: Claim, found: list[Volume]) -> BoolArray:
        """Where an available volume fits the claim: its own pre-bound one alone if it has one."""
        own = [volume for volume in found if volume.claim is not None]
        if own:
            return self._affinity(own[0].node_affinity)
        mask: BoolArray = np.zeros(self.size, dtype=np.bool_)
        for volume in found:
            mask |= self._affinity(volume.node_affinity)
        return mask

    def _provisionable(self, claim: Claim, *, sized: bool) -> BoolArray:
        """Where the claim's class can provision its volume: it has a provisioner, its
        allowedTopologies take the node and, `sized`, a CSIStorageCapacity of the class
        whose topology selects the node has room for it (for drivers that ask for that)."""
        sized = sized and self._sized(claim)

        def provisionable() -> BoolArray:
            found = self.storage.classes.get(claim.storage_class)
            if found is None or found.provisioner in ("", NO_PROVISIONER):
                return np.zeros(self.size, dtype=np.bool_)
            mask = self._affinity(found.allowed_topologies or None)
            return mask & self._room(claim) if sized else mask

        key = ("provision", claim.storage_class, claim.request if sized else None)
        return self._mask(key, provisionable)

    def _mask(self, key: object, make: Callable[[], BoolArray]) -> BoolArray:
        """A node mask kept for the session: what it depends on does not change in one."""
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = make()
        return mask

    def _sized(self, claim: Claim) -> bool:
        """Whether a volume provisioned for the claim needs room its driver reports."""
        found = self.storage.classes.get(claim.storage_class)
        driver = self.storage.drivers.get(found.provisioner) if found is not None else None
        return claim.request > 0 and driver is not None and driver.storage_capacity

    def _room(self, claim: Claim) -> BoolArray:
        room: BoolArray = np.zeros(self.size, dtype=np.bool_)
        for capacity in self.storage.capacities.values():
            topology = capacity.node_topology
            if capacity.storage_class != claim.storage_class or topology is None:
                continue
            if capacity.limit is not None and capacity.limit >= claim.request:
                room |= np.array([topology.matches(n.labels) for n in self.nodes], dtype=np.bool_)
        return room

    def _choose(
        self, claims: list[Claim], row: int, *, sized: bool = True
    ) -> list[tuple[Claim, str]] | None:
        """kube-scheduler's choice on one node: claims from the smallest request up each
        take the smallest fitting volume left, or are provisioned; None when one can't."""
        node = self.nodes[row]
        chosen: list[tuple[Claim, str]] = []
        taken: set[str] = set()
        for claim in sorted(claims, key=lambda c: c.request):
            found = [v for v in self._candidates(claim) if v.name not in taken]
            own = [v for v in found if v.claim is not None]
            if own:
                fits = own[:1] if node_matches(node, own[0].node_affinity) else []
            else:
                fits = sorted(
                    (v for v in found if node_matches(node, v.node_affinity)),
                    key=lambda v: v.capacity,
                )
            if fits:
                taken.add(fits[0].name)
                chosen.append((claim, fits[0].name))
            elif self._provisionable(claim, sized=sized)[row]:
                chosen.append((claim, ""))
            else:
                return None
        return chosen

    def _candidates(self, claim: Claim) -> list[Volume]:
        """Volumes that could hold the claim on some node: kube-scheduler's
        FindMatchingVolume apart from node affinity, less those given out in this session."""
        given = {volume for _, volume in self.decided.values() if volume}
        found = []
        for volume in self._by_class[claim.storage_class]:
            if volume.name in given or volume.deleting or volume.capacity < claim.request:
                continue
            if volume.block != claim.block or volume.attributes_class != claim.attributes_class:
                continue
            if volume.claim is not None:
                if volume.claim.names(claim):
                    found.append(volume)
                continue
            if not volume.available or not claim.access_modes <= volume.access_modes:
                continue
            if claim.selector is not None and not claim.selector.matches(dict(volume.labels)):
                continue
            found.append(volume)
        return found

    # Node masks, cached for the session.

    def _everywhere(self) -> BoolArray:
        return np.ones(self.size, dtype=np.bool_)

    def _only(self, row: int | None) -> BoolArray:
        mask: BoolArray = np.zeros(self.size, dtype=np.bool_)
        if row is not None:
            mask[row] = True
        return mask

    def _affinity(self, terms: NodeTerms | None) -> BoolArray:
        if terms is None:
            return self._everywhere()
        return self._mask(
            terms, lambda: np.array([node_matches(n, terms) for n in self.nodes], dtype=np.bool_)
        )

    def _zone(self, volume: Volume) -> BoolArray:
        """kube-scheduler's VolumeZone: a node without any zone or region label passes;
        otherwise each such label of the volume (values joined by "__"; one with an empty
        value is ignored) needs the node's value among its own."""
        wanted = tuple(
            (key, frozenset(zones))
            for key, value in volume.labels
            if key in ZONE_LABELS and all(zones := [z.strip() for z in value.split("__")])
        )
        if not wanted:
            return self._everywhere()
        return self._mask(
            wanted, lambda: np.array([_in_zone(n, wanted) for n in self.nodes], dtype=np.bool_)
        )

    # What a pod's claims are, as of the snapshot.

    def _claims(self, task: TaskInfo) -> _Claims | str:
        resolved = self._resolved.get(task.key)
        if resolved is None:
            resolved = self._resolved[task.key] = self._resolve(task)
        return resolved

    def _resolve(self, task: TaskInfo) -> _Claims | str:
        pod = task.pod
        storage = self.storage
        bound: list[tuple[Claim, Volume | None]] = []
        delayed: list[Claim] = []
        exclusive: list[str] = []
        for ref in pod.claims:
            key = f"{pod.namespace}/{ref.name}"
            claim = storage.claims.get(key)
            if claim is None:
                rejection = storage.rejection("PersistentVolumeClaim", key)
                if rejection:
                    return rejection
                if ref.ephemeral:
                    return (
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{ref.name}"'
                    )
                return f'persistentvolumeclaim "{ref.name}" not found'
            if claim.lost:
                return (
                    f'persistentvolumeclaim "{claim.name}" bound to non-existent '
                    f'persistentvolume "{claim.volume_name}"'
                )
            if claim.deleting:
                return f'persistentvolumeclaim "{claim.name}" is being deleted'
            if ref.ephemeral and claim.controller != pod.uid:
                return f"PVC {claim.key} was not created for pod {pod.key} (pod is not owner)"
            if claim.bound:
                rejection = storage.rejection("PersistentVolume", claim.volume_name)
                if rejection:
                    return rejection
                bound.append((claim, storage.volumes.get(claim.volume_name)))
            else:
                found = storage.classes.get(claim.storage_class)
                rejection = storage.rejection("StorageClass", claim.storage_class)
                if rejection:
                    return rejection
                if found is None or not found.wait_for_consumer or claim.volume_name:
                    return IMMEDIATE_UNBOUND
                delayed.append(claim)
            if not ref.ephemeral and READ_WRITE_ONCE_POD in claim.access_modes:
                exclusive.append(claim.key)
        return _Claims(
            bound=tuple(bound),
            delayed=tuple(delayed),
            exclusive=tuple(exclusive),
            attaches=tuple(self._attaches(pod.namespace, pod.claims)),
        )

    def _attaches(self, namespace: str, claims: tuple[PodClaim, ...]) -> list[tuple[str, str]]:
        """The CSI volumes the claims attach, as (unique id, driver): a bound claim's by
        its volume's handle, an unbound one's by its class's provisioner and its name, as
        kube-scheduler's NodeVolumeLimits counts them."""
        storage = self.storage
        attaches = []
        for ref in claims:
            claim = storage.claims.get(f"{namespace}/{ref.name}")
            if claim is None:
                continue
            volume = storage.volumes.get(claim.volume_name) if claim.volume_name else None
            if volume is not None:
                if volume.csi is not None:
                    driver, handle = volume.csi
                    attaches.append((f"{driver}/{handle}", driver))
                continue
            found = storage.classes.get(claim.storage_class)
            if found is not None and claim.storage_class:
                attaches.append((f"{found.provisioner}/claim/{claim.key}", found.provisioner))
        return attaches

    # Counting what pods on nodes mount, and what the session gives out.

    def _count(self, namespace: str, claims: tuple[PodClaim, ...], row: int, step: int) -> None:
        for ref in claims:
            self.users[f"{namespace}/{ref.name}"] += step
        attached = self.attached[row]
        for volume_id, driver in self._attaches(namespace, claims):
            before = attached[volume_id]
            attached[volume_id] = after = before + step
            if (before == 0) == (after == 0):
                continue
            if driver in self.attached_count:
                self.attached_count[driver][row] += step
            if after:
                self.holders[volume_id].add(row)
            else:
                self.holders[volume_id].discard(row)

    def _allocated(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        pod = task.pod
        if not pod.claims:
            return
        self._count(pod.namespace, pod.claims, row, +1)
        claims = self._claims(task)
        if isinstance(claims, str) or not claims.delayed:
            return
        undecided = [
            c for c in claims.delayed if c.key not in self.decided and c.selected_node is None
        ]
        for claim, volume in self._choose(undecided, row) or ():
            self.decided[claim.key] = (row, volume)
        bindings = []
        for claim in claims.delayed:
            self.relying[claim.key] += 1
            node, volume = claim.selected_node, ""
            if claim.key in self.decided:
                decided_row, volume = self.decided[claim.key]
                node = self.nodes[decided_row].name
            bindings.append(
                ClaimBinding(claim.namespace, claim.name, claim.uid, node or "", volume)
            )
        self.session.claim_bindings[task.key] = tuple(bindings)

    def _deallocated(self, job: JobInfo, task: TaskInfo, row: int) -> None:
        pod = task.pod
        if not pod.claims:
            return
        self._count(pod.namespace, pod.claims, row, -1)
        self.session.claim_bindings.pop(task.key, None)
        claims = self._claims(task)
        if isinstance(claims, str):
            return
        for claim in claims.delayed:
            self.relying[claim.key] -= 1
            if not self.relying[claim.key]:
                del self.relying[claim.key]
                self.decided.pop(claim.key, None)

    def _attach_limits(self) -> dict[str, IntArray]:
        """Per CSI driver, each node's attach limit (-1: none), from the CSINodes."""
        limits: dict[str, IntArray] = {}
        for row, node in enumerate(self.nodes):
            csi_node = self.storage.csi_nodes.get(node.name)
            if csi_node is None:
                continue
            for driver, count in csi_node.limits:
                if driver not in limits:
                    limits[driver] = np.full(self.size, -1, dtype=np.int64)
                limits[driver][row] = count
        return limits


def awaited(binding: ClaimBinding, claim: Claim | None, classes: Mapping[str, StorageClass]) -> str:
    """What a claim of a placed pod waits on until it is bound (the operator binds none
    of a job's pods before), named for the pod's condition and for `explain`."""
    if binding.volume:
        return (
            f"claim {binding.key} waits for the PersistentVolume controller to bind it "
            f"to volume {binding.volume}"
        )
    known = classes.get(claim.storage_class) if claim is not None else None
    provisioner = f"provisioner {known.provisioner}" if known else "its provisioner"
    return (
        f"claim {binding.key} waits for {provisioner} to provision a volume on node {binding.node}"
    )


def _in_zone(node: Node, wanted: tuple[tuple[str, frozenset[str]], ...]) -> bool:
    labels = node.labels
    if not any(key in labels for key in ZONE_LABELS):
        return True
    for key, values in wanted:
        value = labels.get(key, labels.get(ZONE_LABELS[key]))
        if value is None or value not in values:
            return False
    return True
