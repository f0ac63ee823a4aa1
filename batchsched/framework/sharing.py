"""Consumable capacity (DRAConsumableCapacity, beta and on in Kubernetes 1.36): what a
request consumes of a device's capacities, with kube-scheduler's semantics
(k8s.io/dynamic-resource-allocation v0.36.3, structured/internal/incubating,
consumable_capacity.go).

Every capacity of the device is consumed: the amount the request names, rounded up by
the capacity's requestPolicy (to `min + n * step` within validRange, or to the first
of validValues at least as large); for a capacity the request does not name, the
policy's default, else the whole capacity. A request naming a capacity the device does
not have, or an amount the policy does not allow, cannot use the device. Quantities
are compared exactly; step arithmetic is on whole units rounded up, as upstream's
`Quantity.Value()`.
"""

import math
import uuid
from collections.abc import Mapping
from decimal import Decimal

from batchsched.api.dra import Device, DeviceRequest, RequestPolicy

# Share identities are derived, not random, so that a simulation is reproducible.
_SHARE_NAMESPACE = uuid.UUID("7d1c4c1e-6f0b-4c55-9d55-3f1c6c2a9b10")


def consumed(device: Device, request: DeviceRequest) -> dict[str, Decimal] | None:
    """What the request consumes of each capacity of the device, or None when it may
    not use the device at all."""
    wanted = dict(request.capacity)
    if any(name not in device.capacity for name in wanted):
        return None
    found = {}
    for name, value in device.capacity.items():
        policy = device.policies.get(name)
        amount = _amount(wanted.get(name), value, policy)
        if policy is not None and _violates(amount, policy):
            return None
        found[name] = amount
    return found


def fits(
    device: Device, request: DeviceRequest, in_use: Mapping[str, Decimal]
) -> dict[str, Decimal] | None:
    """What the request consumes of the device, when that and what is `in_use`
    already stay within every capacity; None otherwise."""
    amounts = consumed(device, request)
    if amounts is None:
        return None
    for name, amount in amounts.items():
        if in_use.get(name, Decimal(0)) + amount > device.capacity[name]:
            return None
    return amounts


def share_id(claim_uid: str, request: str, device: str) -> str:
    """status.allocation.devices.results[].shareID of one share of a device."""
    return str(uuid.uuid5(_SHARE_NAMESPACE, f"{claim_uid}/{request}/{device}"))


def _amount(requested: Decimal | None, value: Decimal, policy: RequestPolicy | None) -> Decimal:
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else value
    if policy is None:
        return requested
    if policy.minimum is not None:
        if requested < policy.minimum:
            return policy.minimum
        if policy.step is None:
            return requested
        low, step = _whole(policy.minimum), _whole(policy.step)
        return Decimal(low + step * -((low - _whole(requested)) // step))
    for valid in policy.valid_values:
        if requested <= valid:
            return valid
    return requested


def _violates(amount: Decimal, policy: RequestPolicy) -> bool:
    if policy.default is not None and amount == policy.default:
        return False
    if policy.minimum is not None:
        if policy.maximum is not None and amount > policy.maximum:
            return True
        if policy.step is not None:
            return (_whole(amount) - _whole(policy.minimum)) % _whole(policy.step) != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def _whole(quantity: Decimal) -> int:
    """Quantity.Value(): the quantity in whole units, rounded up."""
    return math.ceil(quantity)
