"""Resource names and the integer units the core computes in.

CPU is kept in millicores and everything else in its base unit (bytes for memory), so
fit checks are exact integer comparisons, as in kube-scheduler.
"""

from collections.abc import Mapping
from functools import lru_cache

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import MAP_TYPES
from batchsched.api.quantity import ceil_int, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU = "nvidia.com/gpu"

# Columns every snapshot has, in this order; extended resources follow, sorted by name.
BASE_RESOURCES: tuple[str, ...] = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE)

# Prefixes of the resource names Kubernetes counts as scalar besides extended ones.
_SCALAR_PREFIXES = ("hugepages-", "attachable-volumes-")
# What a ResourceList quota usage holds beside resources: object counts.
_COUNT_PREFIX = "count/"
# Quota names for requests; an extended resource never starts with it.
_REQUESTS_PREFIX = "requests."

# A node that does not state its pod capacity gets the kubelet's default.
DEFAULT_MAX_PODS = 110

ResourceList = dict[str, int]

# The largest amount one quantity may hold (8 PiB of memory, 9 * 10^12 cores): snapshots
# are int64 arrays, and a larger value would crash them or overflow their sums.
MAX_UNITS = 2**53


def to_units(name: str, value: object, *, where: str) -> int:
    """One quantity in the core's integer unit for resource `name`."""
    if isinstance(value, str):
        units = _known_text(name, value)
        if units is not None:
            return units
    return _units(name, value, where=where)


@lru_cache(maxsize=4096)
def _known_text(name: str, text: str) -> int | None:
    """Parsed once per distinct text: pods of one workload repeat the same few quantities.

    None for text that does not parse; the caller parses it again to say which field.
    """
    try:
        return _units(name, text, where="")
    except InvalidObject:
        return None


def _units(name: str, value: object, *, where: str) -> int:
    quantity = parse_quantity(value, where=where)
    units = ceil_int(quantity * 1000) if name == CPU else ceil_int(quantity)
    if units > MAX_UNITS:
        raise InvalidObject(f"{where}: {value!r} is too large")
    return units


def parse_resource_list(raw: object, *, where: str) -> ResourceList:
    """A Kubernetes ResourceList (`{cpu: "500m", memory: 1Gi}`) in integer units."""
    if raw is None:
        return {}
    if not isinstance(raw, MAP_TYPES):
        raise InvalidObject(f"{where}: expected a map of resource quantities, got {raw!r}")
    return {
        str(name): to_units(str(name), value, where=f"{where}.{name}")
        for name, value in raw.items()
    }


def to_base_units(name: str, value: int) -> float | int:
    """The number users read in JSON: cores for CPU, the base unit for everything else."""
    return value / 1000 if name == CPU else value


def format_amount(name: str, value: int) -> str:
    """A short human form for tables and messages."""
    if name == CPU:
        return f"{value / 1000:g}"
    if name in (MEMORY, EPHEMERAL_STORAGE) and value >= 2**20:
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if value >= size:
                return f"{value / size:.3g}{unit}"
    return str(value)


def add_into(total: ResourceList, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def volcano_counts(name: str) -> bool:
    """Whether Volcano's scheduler counts `name` in a ResourceList it reads (its
    NewResource): the base resources and the scalar ones (extended, hugepages-*,
    attachable-volumes-*, kubernetes.io/*), not object counts (`count/pods`) nor quota
    names (`requests.cpu`), which its job controller writes into a PodGroup's
    minResources beside the resources they repeat."""
    if name in BASE_RESOURCES or name.startswith(_SCALAR_PREFIXES) or "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith((_COUNT_PREFIX, _REQUESTS_PREFIX))
