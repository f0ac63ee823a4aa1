"""Volcano's HyperNodes (topology.volcano.sh/v1alpha1): network switches as a tree.

A HyperNode of tier 1 holds nodes (by exact name, a name pattern or a label selector); a
HyperNode of a higher tier holds HyperNodes by exact name, as Volcano reads them. The
tree itself (which nodes each HyperNode reaches, cycles, unknown members) is resolved
over the snapshot's nodes by model/topology.py.
"""

import re
from dataclasses import dataclass
from enum import StrEnum

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import Obj, describe, mapping, name_of, sequence, text, whole_number
from batchsched.api.reads import reads
from batchsched.api.selectors import Selector, parse_selector

HYPERNODE_API = "topology.volcano.sh/v1alpha1"
HYPERNODE_READS = reads("HyperNode", "apiVersion", "spec.tier", "spec.tierName", "spec.members")


class MemberType(StrEnum):
    NODE = "Node"
    HYPERNODE = "HyperNode"


@dataclass(frozen=True, slots=True)
class Member:
    """One entry of spec.members: exactly one of `name`, `pattern`, `labels` is set."""

    type: MemberType
    name: str | None = None
    pattern: re.Pattern[str] | None = None
    labels: Selector | None = None


@dataclass(frozen=True, slots=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str
    members: tuple[Member, ...]


def hypernode_from_object(obj: Obj) -> HyperNode:
    """Parse a HyperNode; InvalidObject names the field that is wrong."""
    where = describe(obj, kind="HyperNode")
    if obj.get("apiVersion") != HYPERNODE_API:
        raise InvalidObject(f"{where}: apiVersion {obj.get('apiVersion')!r} is not {HYPERNODE_API}")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    if "tier" not in spec:
        raise InvalidObject(f"{where}: spec.tier is required")
    tier = whole_number(spec["tier"], where=f"{where}.spec.tier", minimum=0)
    tier_name = text(spec.get("tierName"), where=f"{where}.spec.tierName", default="")
    raw_members = sequence(spec.get("members"), where=f"{where}.spec.members")
    members = tuple(
        _member(raw, where=f"{where}.spec.members[{i}]") for i, raw in enumerate(raw_members)
    )
    return HyperNode(name=name_of(obj), tier=tier, tier_name=tier_name, members=members)


def _member(raw: object, *, where: str) -> Member:
    entry = mapping(raw, where=where)
    kind = entry.get("type")
    if kind not in tuple(MemberType):
        raise InvalidObject(f"{where}.type: {kind!r} is not one of Node, HyperNode")
    member_type = MemberType(str(kind))
    selector = mapping(entry.get("selector"), where=f"{where}.selector")
    stated = [key for key in ("exactMatch", "regexMatch", "labelMatch") if key in selector]
    if len(stated) != 1:
        raise InvalidObject(
            f"{where}.selector: exactly one of exactMatch, regexMatch, labelMatch is required"
        )
    (key,) = stated
    body = mapping(selector[key], where=f"{where}.selector.{key}")
    if key == "exactMatch":
        name = text(body.get("name"), where=f"{where}.selector.exactMatch.name", default="")
        if not name:
            raise InvalidObject(f"{where}.selector.exactMatch.name: must be a non-empty name")
        return Member(member_type, name=name)
    if member_type is MemberType.HYPERNODE:
        # Volcano links HyperNodes to their parent by exact name only.
        raise InvalidObject(f"{where}.selector.{key}: a HyperNode member is named by exactMatch")
    if key == "regexMatch":
        source = text(body.get("pattern"), where=f"{where}.selector.regexMatch.pattern", default="")
        try:
            return Member(member_type, pattern=re.compile(source))
        except re.error as error:
            raise InvalidObject(
                f"{where}.selector.regexMatch.pattern: {source!r} is not a pattern: {error}"
            ) from error
    labels = parse_selector(body, where=f"{where}.selector.labelMatch")
    if not labels.requirements:
        # Volcano: an empty labelMatch selects no node, not every node.
        return Member(member_type, labels=Selector(nothing=True))
    return Member(member_type, labels=labels)
