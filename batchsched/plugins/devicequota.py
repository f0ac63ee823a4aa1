"""DRA devices held to a queue's capability, as Volcano v1.15.1's capacity plugin holds
them: under `deviceclass/<class>` (devices) and `<dimension>.deviceclass/<class>`
(consumable capacity the requests ask for, per device) in `spec.capability`.

A claim counts once per queue however many of its pods run there (Volcano's claim
references), against the queue and every ancestor stating the key. What a claim counts
is read from its requests: an ExactCount request counts `count` devices of its class
and `count` times each capacity it asks for; a firstAvailable request counts, per
class, the most any of its subrequests asks (the one chosen is known only once
allocated; an allocated claim counts the devices it holds). Volcano leaves `All` and
firstAvailable requests uncounted; here a firstAvailable request is held to the most
it may take, and an unallocated `All` request of a class a queue bounds waits, as how
many devices it takes is known only where it is allocated.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from batchsched.api.dra import ALL, ClaimRequest, Devices, ResourceClaim, claim_keys
from batchsched.api.objects import Queue, Task
from batchsched.api.queues import DEVICE_CLASS_QUOTA, is_device_class_quota
from batchsched.model.snapshot import Snapshot

Amounts = dict[str, int]


@dataclass(frozen=True, slots=True)
class Uncounted:
    """A claim with an unallocated `All` request: how many devices of its class it takes
    is known only once it is allocated."""

    class_name: str


class DeviceQuota:
    """Per queue, the devices its pods' claims hold, against the device keys of its
    capability and its ancestors'."""

    def __init__(self, snapshot: Snapshot, lineage: Mapping[str, tuple[str, ...]]) -> None:
        self.devices: Devices = snapshot.devices
        self.lineage = lineage
        self.limits: dict[str, Amounts] = {
            name: _device_keys(queue) for name, queue in snapshot.queues.items()
        }
        self.bounded = {key for limits in self.limits.values() for key in limits}
        self.used: dict[str, Amounts] = {name: {} for name in snapshot.queues}
        # Per queue, how many of its placed pods use each claim.
        self.refs: dict[str, dict[str, int]] = {name: {} for name in snapshot.queues}
        self._claims: dict[str, Amounts | Uncounted] = {}
        if not self.bounded:
            return
        for _, task in snapshot.placed:
            job = snapshot.job_of(task)
            if job is not None and job.queue in self.lineage:
                self.take(job.queue, task, +1)

    def take(self, queue: str, task: Task, step: int) -> None:
        """The pod is placed in the queue (+1) or leaves it (-1)."""
        if not self.bounded:
            return
        for key in claim_keys(task, extended=False):
            for name in self.lineage[queue]:
                refs = self.refs[name]
                before = refs.get(key, 0)
                refs[key] = before + step
                if refs[key] <= 0:
                    del refs[key]
                if before == 0 or refs.get(key, 0) == 0:
                    self._add(name, self.claim(key), step)

    def _add(self, queue: str, amounts: Amounts | Uncounted, step: int) -> None:
        if isinstance(amounts, Uncounted):
            return
        used = self.used[queue]
        for key, amount in amounts.items():
            used[key] = used.get(key, 0) + amount * step

    def over(self, queue: str, tasks: Iterable[Task], what: str) -> str | None:
        """Why the pods would take the queue or an ancestor past the device keys of
        its capability, naming the queue and the key; None when they stay within."""
        if not self.bounded:
            return None
        for name in self.lineage[queue]:
            limits = self.limits[name]
            if not limits:
                continue
            adding: Amounts = {}
            seen: set[str] = set()
            for task in tasks:
                for key in claim_keys(task, extended=False):
                    if key in seen or self.refs[name].get(key):
                        continue
                    seen.add(key)
                    amounts = self.claim(key)
                    if isinstance(amounts, Uncounted):
                        bounded = f"{DEVICE_CLASS_QUOTA}{amounts.class_name}"
                        if any(k.endswith(bounded) for k in limits):
                            return (
                                f"queue {name}: {what} has claim {key} asking all devices "
                                f"of class {amounts.class_name}, which its capability "
                                "bounds: how many that is is known only once allocated"
                            )
                        continue
                    for limit_key, amount in amounts.items():
                        adding[limit_key] = adding.get(limit_key, 0) + amount
            used = self.used[name]
            for key, limit in sorted(limits.items()):
                extra = adding.get(key, 0)
                if extra and used.get(key, 0) + extra > limit:
                    return (
                        f"queue {name}: {what} would exceed its capability for {key} "
                        f"({used.get(key, 0)} of {limit} in use, {extra} more asked)"
                    )
        return None

    def claim(self, key: str) -> Amounts | Uncounted:
        """What the claim counts under each device key, or Uncounted for an unallocated
        `All` request; {} for a claim not seen."""
        found = self._claims.get(key)
        if found is None:
            claim = self.devices.claims.get(key)
            found = self._claims[key] = {} if claim is None else _amounts(claim)
        return found


def _device_keys(queue: Queue) -> Amounts:
    return {
        name: amount for name, amount in queue.capability.items() if is_device_class_quota(name)
    }


def _amounts(claim: ResourceClaim) -> Amounts | Uncounted:
    requests = {r.name: r for r in claim.spec.requests}
    found: dict[str, Decimal] = {}
    if claim.allocation is not None:
        alternatives = {a.name: a for r in claim.spec.requests for a in r.alternatives}
        for result in claim.allocation.devices:
            alternative = alternatives.get(result.request)
            if alternative is not None:
                _count(found, alternative.class_name, 1, alternative.capacity)
        return _whole(found)
    for request in requests.values():
        counted = _request(request)
        if isinstance(counted, Uncounted):
            return counted
        for key, amount in counted.items():
            found[key] = found.get(key, Decimal(0)) + amount
    return _whole(found)


def _request(request: ClaimRequest) -> dict[str, Decimal] | Uncounted:
    most: dict[str, Decimal] = {}
    for alternative in request.alternatives:
        if alternative.mode == ALL:
            return Uncounted(alternative.class_name)
        counted: dict[str, Decimal] = {}
        _count(counted, alternative.class_name, alternative.count, alternative.capacity)
        for key, amount in counted.items():
            most[key] = max(most.get(key, Decimal(0)), amount)
    return most


def _count(
    into: dict[str, Decimal], class_name: str, count: int, capacity: Iterable[tuple[str, Decimal]]
) -> None:
    key = f"{DEVICE_CLASS_QUOTA}{class_name}"
    into[key] = into.get(key, Decimal(0)) + count
    for dimension, amount in capacity:
        key = f"{dimension}.{DEVICE_CLASS_QUOTA}{class_name}"
        into[key] = into.get(key, Decimal(0)) + amount * count


def _whole(amounts: Mapping[str, Decimal]) -> Amounts:
    return {key: math.ceil(amount) for key, amount in amounts.items()}
