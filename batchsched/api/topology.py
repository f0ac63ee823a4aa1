"""What a gang asks of the topology: its members in one domain, and of which tier.

Every peer's way of asking comes to one TopologyAsk:
- Volcano's (and our) PodGroup `spec.networkTopology`: `mode` hard or soft, and the
  highest tier the whole job may span, by number (`highestTierAllowed`) or by name
  (`highestTierName`);
- the native PodGroup's `spec.schedulingConstraints.topology[0].key`, and Kueue's
  `podset-required-topology` / `podset-preferred-topology`: a node label key;
- Volcano's `spec.subGroupPolicy` and Kueue's slices: parts of a gang, each in one
  domain of its own (SubGroupPolicy).
The domains themselves are the model's (model/topology.py); framework/topology.py
turns an ask into candidate domains.
"""

from dataclasses import dataclass
from enum import StrEnum

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import mapping, sequence, text, whole_number
from batchsched.api.selectors import Selector, parse_selector


class Mode(StrEnum):
    HARD = "hard"
    SOFT = "soft"


@dataclass(frozen=True, slots=True)
class TopologyAsk:
    """All members asked for in one domain. Exactly one of `key` (a node label),
    `highest_tier` or `tier_name` (tiers up to that one, lowest first) is set; with none
    set, any tier. `where` names the object and field asking, for waiting reasons."""

    mode: Mode
    where: str
    key: str | None = None
    highest_tier: int | None = None
    tier_name: str | None = None
    # A `key` that is a configured tier's label names that tier's domains, told apart by
    # the coarser tiers too, as Kueue's Topology levels are; False: one domain per value
    # of the label, as kube-scheduler groups nodes by a topology key.
    levelled: bool = False

    @property
    def required(self) -> bool:
        return self.mode is Mode.HARD


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    """Volcano's spec.subGroupPolicy entry: the members `selector` selects, grouped by
    their values of `match_keys`, make sub-groups of `size`, each in one domain of
    `ask` (None: no constraint of its own)."""

    name: str
    selector: Selector | None
    match_keys: tuple[str, ...]
    size: int
    ask: TopologyAsk | None


def network_topology(raw: object, *, where: str) -> TopologyAsk | None:
    """A PodGroup's networkTopology (Volcano's shape); None when it states none."""
    if raw is None:
        return None
    spec = mapping(raw, where=where)
    mode = text(spec.get("mode"), where=f"{where}.mode", default=Mode.HARD)
    if mode not in tuple(Mode):
        raise InvalidObject(f"{where}.mode: {mode!r} is not one of hard, soft")
    highest = spec.get("highestTierAllowed")
    name = text(spec.get("highestTierName"), where=f"{where}.highestTierName", default="")
    if highest is not None and name:
        raise InvalidObject(f"{where}: highestTierAllowed and highestTierName may not both be set")
    return TopologyAsk(
        mode=Mode(mode),
        where=where,
        highest_tier=None
        if highest is None
        else whole_number(highest, where=f"{where}.highestTierAllowed", minimum=0),
        tier_name=name or None,
    )


def sub_group_policies(raw: object, *, where: str) -> tuple[SubGroupPolicy, ...]:
    """Volcano's spec.subGroupPolicy. minSubGroups above 0 (a quorum of sub-groups) is
    not kept by the core: refused, naming it."""
    policies = []
    for i, item in enumerate(sequence(raw, where=where)):
        at = f"{where}[{i}]"
        entry = mapping(item, where=at)
        if whole_number(entry.get("minSubGroups", 0), where=f"{at}.minSubGroups", minimum=0):
            raise InvalidObject(
                f"{at}.minSubGroups: {entry['minSubGroups']!r} is not supported: batchsched "
                "keeps no quorum of sub-groups (0, every sub-group of the gang, is)"
            )
        keys = sequence(entry.get("matchLabelKeys"), where=f"{at}.matchLabelKeys")
        policies.append(
            SubGroupPolicy(
                name=text(entry.get("name"), where=f"{at}.name", default=str(i)),
                selector=None
                if entry.get("labelSelector") is None
                else parse_selector(entry["labelSelector"], where=f"{at}.labelSelector"),
                match_keys=tuple(str(key) for key in keys),
                size=whole_number(
                    entry.get("subGroupSize", 1), where=f"{at}.subGroupSize", minimum=1
                ),
                ask=network_topology(entry.get("networkTopology"), where=f"{at}.networkTopology"),
            )
        )
    return tuple(policies)


def native_topology(raw: object, *, where: str) -> TopologyAsk | None:
    """The native PodGroup's spec.schedulingConstraints (scheduling.k8s.io/v1alpha2):
    its one topology key, all members on nodes sharing that label's value. For the
    native PodGroup's parser to call with its schedulingConstraints."""
    if raw is None:
        return None
    constraints = mapping(raw, where=where)
    entries = sequence(constraints.get("topology"), where=f"{where}.topology")
    if not entries:
        return None
    if len(entries) > 1:
        raise InvalidObject(f"{where}.topology: at most one entry is allowed, not {len(entries)}")
    entry = mapping(entries[0], where=f"{where}.topology[0]")
    key = text(entry.get("key"), where=f"{where}.topology[0].key", default="")
    if not key:
        raise InvalidObject(f"{where}.topology[0].key: must be a node label key")
    return TopologyAsk(mode=Mode.HARD, where=f"{where}.topology[0].key", key=key)


# Kueue's pod-set annotations (its Topology Aware Scheduling), on the pods it admits.
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
KUEUE_GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# The label Kueue gives each pod: the name of its pod set.
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
KUEUE_ANNOTATIONS = (
    KUEUE_REQUIRED,
    KUEUE_PREFERRED,
    KUEUE_UNCONSTRAINED,
    KUEUE_SLICE_TOPOLOGY,
    KUEUE_SLICE_SIZE,
    KUEUE_SLICE_LAYERS,
    KUEUE_GROUP_NAME,
)


@dataclass(frozen=True, slots=True)
class PodSetTopology:
    """What Kueue's annotations ask of a pod's pod set: the set in one domain (`ask`),
    and slices of `slice_size` members each in one domain of `slice_key`. `part` names
    the pod set (or the group of pod sets placed together)."""

    part: str
    ask: TopologyAsk | None
    slice_key: str | None = None
    slice_size: int | None = None
    # The pod and annotation stating the slices, for waiting reasons.
    slice_where: str = ""


def kueue_topology(
    notes: dict[str, str], labels: dict[str, str], *, where: str
) -> PodSetTopology | None:
    """A pod's Kueue topology annotations; None when it has none that constrain."""
    at = f"{where}.metadata.annotations"
    if KUEUE_SLICE_LAYERS in notes:
        raise InvalidObject(
            f"{at}[{KUEUE_SLICE_LAYERS}]: {notes[KUEUE_SLICE_LAYERS]!r} is not supported: "
            "batchsched keeps one slice layer (podset-slice-required-topology)"
        )
    required, preferred = notes.get(KUEUE_REQUIRED), notes.get(KUEUE_PREFERRED)
    if required and preferred:
        raise InvalidObject(f"{at}: {KUEUE_REQUIRED} and {KUEUE_PREFERRED} may not both be set")
    ask = None
    if required:
        ask = TopologyAsk(Mode.HARD, where=f"{at}[{KUEUE_REQUIRED}]", key=required, levelled=True)
    elif preferred:
        ask = TopologyAsk(Mode.SOFT, where=f"{at}[{KUEUE_PREFERRED}]", key=preferred, levelled=True)
    slice_key = notes.get(KUEUE_SLICE_TOPOLOGY) or None
    size = notes.get(KUEUE_SLICE_SIZE)
    if (slice_key is None) != (size is None):
        raise InvalidObject(f"{at}: {KUEUE_SLICE_TOPOLOGY} and {KUEUE_SLICE_SIZE} go together")
    if ask is None and slice_key is None:
        return None
    part = notes.get(KUEUE_GROUP_NAME) or labels.get(KUEUE_PODSET_LABEL) or ""
    return PodSetTopology(
        part=part,
        ask=ask,
        slice_key=slice_key,
        slice_size=None
        if size is None
        else whole_number(size, where=f"{at}[{KUEUE_SLICE_SIZE}]", minimum=1),
        slice_where=f"{at}[{KUEUE_SLICE_SIZE}]",
    )
