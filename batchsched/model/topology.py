"""The cluster's topology: nodes grouped into domains, per node label and per tier.

Two sources, read once per change of the nodes (the snapshot keeper keeps one Topology
until nodes or HyperNodes change):
- a node label key: each value is a domain (a rack, an NVLink clique); asked for by
  name, by configured tiers, the native PodGroup's topology key and Kueue's annotations;
- Volcano's HyperNodes: each tier's HyperNodes are its domains, each reaching the nodes
  of its members, through nested HyperNodes down to tier-1 ones.

A domain is an index per tier: `ids[row]` is the domain of node `row`, or NO_DOMAIN.
A node reached by two HyperNodes of one tier is in no domain of that tier, named in
`shared`: which of them holds it is not known, so no gang asking that tier is placed on
it as if one did (Volcano counts it in each).
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from batchsched.api.hypernodes import HyperNode, Member, MemberType
from batchsched.api.objects import Node
from batchsched.model.arrays import BoolArray, IntArray

NO_DOMAIN = -1
# A coarser label a node lacks, in the name of a nested domain.
MISSING = "-"


@dataclass(frozen=True, slots=True)
class Tier:
    """One level of domains: `ids` maps node rows to indices of `domains` (their names)."""

    number: int
    name: str
    ids: IntArray
    domains: tuple[str, ...]


@dataclass(slots=True)
class Topology:
    nodes: Sequence[Node]
    hypernodes: Mapping[str, HyperNode] = field(default_factory=dict)
    # HyperNodes that could not be parsed, name -> why.
    rejected: Mapping[str, str] = field(default_factory=dict)
    # HyperNode name -> why it is left out of the tree (rejected, a cycle, an unknown
    # member, a member of several, or one listing such a member); the HyperNodes above
    # it are left out with it.
    errors: dict[str, str] = field(init=False)
    # (tier number, node name) -> why the node is in no domain of that tier: several
    # HyperNodes of the tier reach it.
    shared: dict[tuple[int, str], str] = field(init=False, default_factory=dict)
    # The HyperNode tiers, lowest first.
    tiers: tuple[Tier, ...] = field(init=False)
    _labels: dict[str, Tier] = field(init=False, default_factory=dict)
    _binned: dict[str, IntArray] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.errors = dict(self.rejected)
        self.tiers = self._hyper_tiers() if self.hypernodes else ()

    def label(self, key: str) -> Tier:
        """The domains of a node label: one per value; nodes without it in none."""
        tier = self._labels.get(key)
        if tier is None:
            values: dict[str, int] = {}
            raw = [
                NO_DOMAIN
                if (value := node.labels.get(key)) is None
                else values.setdefault(value, len(values))
                for node in self.nodes
            ]
            tier = Tier(0, key, np.array(raw, dtype=np.int64), tuple(values))
            self._labels[key] = tier
        return tier

    def nested(self, key: str, above: Sequence[str]) -> Tier:
        """The domains of a label within those of the coarser labels `above` (coarsest
        first): nodes sharing a value of `key` are in one domain only when they share
        their values of `above` as well, as Kueue's Topology levels tell domains apart
        (rack r1 of block b1 is not rack r1 of block b2); a label missing is a value of
        its own. A domain is named by its value, or where that value repeats by its
        values from the coarsest down, `-` standing for a label missing (no label's
        value is `-`, nor holds a `/`), so that every level keeps its place and two
        domains never share a name."""
        if not above:
            return self.label(key)
        cached = self._labels.get("\n".join([*above, key]))
        if cached is not None:
            return cached
        # (the coarser values, None where missing; the value) -> the domain's index
        paths: dict[tuple[tuple[str | None, ...], str], int] = {}
        raw = []
        for node in self.nodes:
            value = node.labels.get(key)
            if value is None:
                raw.append(NO_DOMAIN)
                continue
            path = (tuple(node.labels.get(k) for k in above), value)
            raw.append(paths.setdefault(path, len(paths)))
        repeated = Counter(value for _, value in paths)
        names = tuple(
            value
            if repeated[value] == 1
            else "/".join([*(MISSING if v is None else v for v in coarser), value])
            for coarser, value in paths
        )
        tier = Tier(0, key, np.array(raw, dtype=np.int64), names)
        self._labels["\n".join([*above, key])] = tier
        return tier

    def ids(self, key: str) -> IntArray:
        """Per node row, its domain of the label, or `size(key)` for those without:
        the form pod affinity counts per domain in (one extra bin for no domain)."""
        binned = self._binned.get(key)
        if binned is None:
            tier = self.label(key)
            binned = np.where(tier.ids == NO_DOMAIN, len(tier.domains), tier.ids)
            self._binned[key] = binned
        return binned

    def size(self, key: str) -> int:
        return len(self.label(key).domains)

    def _hyper_tiers(self) -> tuple[Tier, ...]:
        reach = self._reach()
        index = {node.name: row for row, node in enumerate(self.nodes)}
        numbers = sorted({h.tier for name, h in self.hypernodes.items() if name in reach})
        tiers = []
        for number in numbers:
            names = sorted(n for n, h in self.hypernodes.items() if h.tier == number and n in reach)
            members = [
                np.array([index[node] for node in reach[name] if node in index], dtype=np.int64)
                for name in names
            ]
            ids = np.full(len(self.nodes), NO_DOMAIN, dtype=np.int64)
            count = np.zeros(len(self.nodes), dtype=np.int64)
            for domain, rows in enumerate(members):
                ids[rows] = domain
                count[rows] += 1
            # A node two of them reach is in neither: whichever holds it, no gang
            # asking this tier is then placed across the boundary between them.
            shared = count > 1
            if shared.any():
                self._share(number, names, members, shared)
                ids[shared] = NO_DOMAIN
            tier_names = {self.hypernodes[n].tier_name for n in names} - {""}
            label = min(tier_names) if tier_names else f"tier {number}"
            tiers.append(Tier(number, label, ids, tuple(names)))
        return tuple(tiers)

    def _share(
        self, number: int, names: Sequence[str], members: Sequence[IntArray], shared: BoolArray
    ) -> None:
        """Name each node of tier `number` that several of its HyperNodes reach, with
        them (`shared` marks their rows; `members[i]`, the rows `names[i]` reaches)."""
        holders: dict[int, list[str]] = {}
        for name, rows in zip(names, members, strict=True):
            for row in rows[shared[rows]].tolist():
                holders.setdefault(row, []).append(name)
        for row, claims in holders.items():
            node = self.nodes[row].name
            self.shared[number, node] = (
                f"Node {node}: a member of several HyperNodes of tier {number}: "
                + ", ".join(claims)
            )

    def _reach(self) -> dict[str, frozenset[str]]:
        """HyperNode name -> the node names it reaches, for those that resolve."""
        parents: dict[str, set[str]] = {}
        for name in sorted(self.hypernodes):
            for member in self.hypernodes[name].members:
                if member.type is not MemberType.HYPERNODE or member.name is None:
                    continue
                child = member.name
                if child in self.rejected:
                    self.errors[name] = f"HyperNode {name}: its member {self.rejected[child]}"
                elif child not in self.hypernodes:
                    self.errors[name] = (
                        f"HyperNode {name}: spec.members names HyperNode {child}, "
                        "which does not exist"
                    )
                else:
                    parents.setdefault(child, set()).add(name)
        for child, claims in parents.items():
            if len(claims) > 1:
                self._disputed(child, sorted(claims))
        reach: dict[str, frozenset[str]] = {}
        for name in sorted(self.hypernodes):
            self._resolve(name, reach, ())
        return reach

    def _disputed(self, child: str, claims: Sequence[str]) -> None:
        """Leave out a HyperNode that several HyperNodes list as a member, and each of
        them: which one holds it is not known, so none may be placed across it (those
        above them are left out as they resolve)."""
        listed = ", ".join(claims)
        self.errors.setdefault(
            child, f"HyperNode {child}: a member of several HyperNodes: {listed}"
        )
        for parent in claims:
            others = ", ".join(c for c in claims if c != parent)
            self.errors.setdefault(
                parent,
                f"HyperNode {parent}: spec.members names HyperNode {child}, "
                f"also a member of HyperNode {others}",
            )

    def _resolve(
        self, name: str, reach: dict[str, frozenset[str]], path: tuple[str, ...]
    ) -> frozenset[str] | None:
        if name in reach:
            return reach[name]
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            for looped in path[path.index(name) :]:
                self.errors.setdefault(
                    looped, f"HyperNode {looped}: spec.members form a cycle: {cycle}"
                )
            return None
        if name in self.errors:
            return None
        reached: set[str] = set()
        for member in self.hypernodes[name].members:
            if member.type is MemberType.HYPERNODE:
                below = self._resolve(str(member.name), reach, (*path, name))
                if below is None:
                    self.errors.setdefault(
                        name, f"HyperNode {name}: its member HyperNode {member.name} is left out"
                    )
                    return None
                reached |= below
            else:
                reached |= _matching(member, self.nodes)
        if name in self.errors:
            return None
        reach[name] = frozenset(reached)
        return reach[name]


def _matching(member: Member, nodes: Sequence[Node]) -> set[str]:
    """The node names a Node member selects: by name (present or not), pattern or labels."""
    if member.name is not None:
        return {member.name}
    if member.pattern is not None:
        pattern = member.pattern
        return {node.name for node in nodes if pattern.search(node.name)}
    labels = member.labels
    return {node.name for node in nodes if labels is not None and labels.matches(node.labels)}
