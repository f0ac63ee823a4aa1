"""Pod affinity and anti-affinity terms, with the defaulting the API server applies.

A term's namespaces are resolved against the pod that states it (its own namespace
when the term names none and has no namespace selector), and matchLabelKeys and
mismatchLabelKeys are merged into its label selector from the pod's labels, as the API
server does when the pod is created: a term then reads the same wherever it is used.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import mapping, sequence
from batchsched.api.selectors import NOTHING, Requirement, Selector, parse_selector

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# Every Namespace carries its own name as this label (set by the API server).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector
    topology_key: str

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        """Whether a pod in `namespace` (whose Namespace has `namespace_labels`) with
        `labels` is one of the pods this term selects."""
        if namespace not in self.namespaces and not self.namespace_selector.matches(
            namespace_labels
        ):
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's podAffinity and podAntiAffinity, required and preferred."""

    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()


def pod_affinity(
    affinity: Mapping[str, object], *, namespace: str, labels: Mapping[str, str], where: str
) -> PodAffinity | None:
    """The pod's terms from spec.affinity, or None when it states none."""
    parsed: dict[str, tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        at = f"{where}.spec.affinity.{kind}"
        section = mapping(affinity.get(kind), where=at)
        required = tuple(
            _term(raw, namespace=namespace, labels=labels, where=f"{at}.{REQUIRED}[{i}]")
            for i, raw in enumerate(sequence(section.get(REQUIRED), where=f"{at}.{REQUIRED}"))
        )
        preferred = tuple(
            _weighted(raw, namespace=namespace, labels=labels, where=f"{at}.{PREFERRED}[{i}]")
            for i, raw in enumerate(sequence(section.get(PREFERRED), where=f"{at}.{PREFERRED}"))
        )
        parsed[kind] = (required, preferred)
    result = PodAffinity(
        affinity=parsed["podAffinity"][0],
        anti_affinity=parsed["podAntiAffinity"][0],
        preferred_affinity=parsed["podAffinity"][1],
        preferred_anti_affinity=parsed["podAntiAffinity"][1],
    )
    return None if result == PodAffinity() else result


def term_weight(entry: Mapping[str, object], *, where: str) -> int:
    """A preferred term's weight, which the API server holds to 1..100."""
    weight = entry.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
        raise InvalidObject(f"{where}.weight: {weight!r} is not a whole number from 1 to 100")
    return weight


def _weighted(
    raw: object, *, namespace: str, labels: Mapping[str, str], where: str
) -> WeightedTerm:
    entry = mapping(raw, where=where)
    weight = term_weight(entry, where=where)
    term = _term(
        entry.get("podAffinityTerm"),
        namespace=namespace,
        labels=labels,
        where=f"{where}.podAffinityTerm",
    )
    return WeightedTerm(weight, term)


def _term(raw: object, *, namespace: str, labels: Mapping[str, str], where: str) -> AffinityTerm:
    entry = mapping(raw, where=where)
    topology_key = entry.get("topologyKey")
    if not isinstance(topology_key, str) or not topology_key:
        raise InvalidObject(f"{where}.topologyKey: must be a non-empty label key")
    raw_selector = entry.get("labelSelector")
    selector = parse_selector(raw_selector, where=f"{where}.labelSelector")
    merged = list(selector.requirements)
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        keys = sequence(entry.get(field), where=f"{where}.{field}")
        if keys and raw_selector is None:
            raise InvalidObject(f"{where}.{field}: may not be set without labelSelector")
        merged += [Requirement(str(k), operator, (labels[k],)) for k in keys if k in labels]
    if len(merged) > len(selector.requirements):
        selector = Selector(tuple(merged))
    names = frozenset(
        str(n) for n in sequence(entry.get("namespaces"), where=f"{where}.namespaces")
    )
    raw_namespaces = entry.get("namespaceSelector")
    namespace_selector = (
        NOTHING
        if raw_namespaces is None
        else parse_selector(raw_namespaces, where=f"{where}.namespaceSelector")
    )
    if not names and raw_namespaces is None:
        names = frozenset({namespace})
    return AffinityTerm(selector, names, namespace_selector, topology_key)
