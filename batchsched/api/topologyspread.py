"""Pod topology spread constraints, checked as the API server checks them.

matchLabelKeys are merged into the label selector from the pod's labels, as the API
server does when the pod is created, so a constraint reads the same wherever it is
used. Its pods are always those of the pod's own namespace, which the caller knows.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import mapping, sequence
from batchsched.api.selectors import NOTHING, Requirement, Selector, parse_selector

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
FIELD = "spec.topologySpreadConstraints"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (a filter), else ScheduleAnyway (a score)
    selector: Selector
    # Below this many eligible domains the global minimum is taken to be 0 (default 1).
    min_domains: int = 1
    # Which nodes' pods and domains count: those the pod's required node affinity
    # selects (nodeAffinityPolicy Honor, the default), and those whose NoSchedule and
    # NoExecute taints it tolerates (nodeTaintsPolicy Honor; the default Ignore).
    honor_affinity: bool = True
    honor_taints: bool = False

    @property
    def counts_pods(self) -> bool:
        """Whether any pod counts: kube-scheduler counts none for an empty selector,
        though the pod being placed matches it itself."""
        return not self.selector.nothing and bool(self.selector.requirements)


Spread = tuple[SpreadConstraint, ...]


def spread_constraints(raw: object, *, labels: Mapping[str, str], where: str) -> Spread:
    """A pod's spec.topologySpreadConstraints."""
    at = f"{where}.{FIELD}"
    constraints = tuple(
        spread_constraint(entry, labels=labels, where=f"{at}[{i}]", selector_allowed=True)
        for i, entry in enumerate(sequence(raw, where=at))
    )
    check_unique(constraints, where=at)
    return constraints


def check_unique(constraints: Spread, *, where: str) -> None:
    """The API server refuses two constraints with one topologyKey and whenUnsatisfiable."""
    seen: set[tuple[str, bool]] = set()
    for i, constraint in enumerate(constraints):
        pair = (constraint.topology_key, constraint.hard)
        if pair in seen:
            when = DO_NOT_SCHEDULE if constraint.hard else SCHEDULE_ANYWAY
            raise InvalidObject(
                f"{where}[{i}]: duplicate topologyKey {constraint.topology_key!r} "
                f"with whenUnsatisfiable {when}"
            )
        seen.add(pair)


def spread_constraint(
    raw: object, *, labels: Mapping[str, str], where: str, selector_allowed: bool
) -> SpreadConstraint:
    """One constraint; `selector_allowed` is False for cluster-level defaults, whose
    pods are found through matchLabelKeys alone."""
    entry = mapping(raw, where=where)
    max_skew = entry.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
        raise InvalidObject(f"{where}.maxSkew: {max_skew!r} must be greater than zero")
    topology_key = entry.get("topologyKey")
    if not isinstance(topology_key, str) or not topology_key:
        raise InvalidObject(f"{where}.topologyKey: must be a non-empty label key")
    when = entry.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise InvalidObject(
            f"{where}.whenUnsatisfiable: {when!r} is not one of {DO_NOT_SCHEDULE}, "
            f"{SCHEDULE_ANYWAY}"
        )
    min_domains = entry.get("minDomains")
    if min_domains is not None:
        if isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains < 1:
            raise InvalidObject(f"{where}.minDomains: {min_domains!r} must be greater than zero")
        if when != DO_NOT_SCHEDULE:
            raise InvalidObject(
                f"{where}.minDomains: may only be set with whenUnsatisfiable {DO_NOT_SCHEDULE}"
            )
    raw_selector = entry.get("labelSelector")
    if raw_selector is not None and not selector_allowed:
        raise InvalidObject(
            f"{where}.labelSelector: may not be set: a default constraint's pods are "
            "those sharing the pod's values of its matchLabelKeys"
        )
    selector = parse_selector(raw_selector, where=f"{where}.labelSelector")
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        hard=when == DO_NOT_SCHEDULE,
        selector=_merged(selector, entry, labels=labels, where=where, default=not selector_allowed),
        min_domains=1 if min_domains is None else min_domains,
        honor_affinity=_policy(entry, "nodeAffinityPolicy", HONOR, where=where),
        honor_taints=_policy(entry, "nodeTaintsPolicy", IGNORE, where=where),
    )


def label_keys(raw: object) -> tuple[str, ...]:
    """Every matchLabelKey that constraints as written name, without checking them: the
    only labels of the pod their parsing reads."""
    if not isinstance(raw, list):
        return ()
    keys = (e.get("matchLabelKeys") for e in raw if isinstance(e, Mapping))
    return tuple(str(k) for named in keys if isinstance(named, list) for k in named)


def match_label_keys(raw: object, *, where: str) -> tuple[str, ...]:
    return tuple(str(k) for k in sequence(raw, where=f"{where}.matchLabelKeys"))


def _merged(
    selector: Selector,
    entry: Mapping[str, object],
    *,
    labels: Mapping[str, str],
    where: str,
    default: bool,
) -> Selector:
    """The selector with `key In (pod's value)` for each matchLabelKey the pod carries.
    A default constraint has no labelSelector: its keys alone make the selector, and a
    pod carrying none of them selects nothing."""
    keys = match_label_keys(entry.get("matchLabelKeys"), where=where)
    if not keys:
        return selector
    if selector.nothing and not default:
        raise InvalidObject(f"{where}.matchLabelKeys: may not be set without labelSelector")
    named = {r.key for r in selector.requirements}
    for key in keys:
        if key in named:
            raise InvalidObject(
                f"{where}.matchLabelKeys: {key!r} exists in both matchLabelKeys and labelSelector"
            )
    merged = tuple(Requirement(k, "In", (labels[k],)) for k in keys if k in labels)
    if default:
        return Selector(merged) if merged else NOTHING
    return Selector((*selector.requirements, *merged)) if merged else selector


def _policy(entry: Mapping[str, object], name: str, default: str, *, where: str) -> bool:
    """Whether the node inclusion policy is Honor."""
    value = entry.get(name)
    if value is None:
        return default == HONOR
    if value not in (HONOR, IGNORE):
        raise InvalidObject(f"{where}.{name}: {value!r} is not one of {HONOR}, {IGNORE}")
    return value == HONOR
