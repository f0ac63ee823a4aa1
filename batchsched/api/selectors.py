"""Label selectors (metav1.LabelSelector), parsed and checked as the API server checks them.

A nil selector selects nothing and an empty one everything: pod affinity terms and
namespace selectors depend on the difference.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import mapping, sequence


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement; `field` marks a matchFields entry (metadata.name)."""

    key: str
    operator: str
    values: tuple[str, ...]
    field: bool = False


class Labelled(Protocol):
    """What a node selector term reads of a node: api/objects.py's Node, named by shape
    because objects.py builds on this module."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(requirement_matches(labels.get(r.key), r) for r in self.requirements)

    def indexed_by(self) -> tuple[tuple[str, str], ...] | None:
        """Label pairs one of which any matching object carries (from its first In
        requirement), for looking candidates up instead of trying every object; None
        when there is no such requirement."""
        for requirement in self.requirements:
            if requirement.operator == "In":
                return tuple((requirement.key, value) for value in requirement.values)
        return None


NOTHING = Selector(nothing=True)


def parse_selector(raw: object, *, where: str) -> Selector:
    if raw is None:
        return NOTHING
    selector = mapping(raw, where=where)
    match_labels = mapping(selector.get("matchLabels"), where=f"{where}.matchLabels")
    requirements = [Requirement(str(k), "In", (str(v),)) for k, v in match_labels.items()]
    expressions = sequence(selector.get("matchExpressions"), where=f"{where}.matchExpressions")
    for i, item in enumerate(expressions):
        requirements.append(_expression(item, where=f"{where}.matchExpressions[{i}]"))
    return Selector(tuple(requirements))


def _expression(raw: object, *, where: str) -> Requirement:
    entry = mapping(raw, where=where)
    operator = str(entry.get("operator", ""))
    if operator not in SELECTOR_OPERATORS:
        raise InvalidObject(
            f"{where}.operator: {operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}"
        )
    values = tuple(str(v) for v in sequence(entry.get("values"), where=f"{where}.values"))
    if operator in ("In", "NotIn") and not values:
        raise InvalidObject(f"{where}.values: must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidObject(f"{where}.values: must be empty when operator is {operator}")
    return Requirement(str(entry.get("key", "")), operator, values)


def requirement_matches(value: str | None, requirement: Requirement) -> bool:
    """Whether a label value (None: the label is absent) meets the requirement; Gt and Lt,
    which only node selectors allow, compare whole numbers."""
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None or len(requirement.values) != 1:
        return False
    try:
        label, bound = int(value), int(requirement.values[0])
    except ValueError:
        return False
    return label > bound if operator == "Gt" else label < bound


NODE_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def node_selector_term(raw: object, *, where: str) -> tuple[Requirement, ...]:
    term = mapping(raw, where=where)
    requirements = []
    for section, is_field in (("matchExpressions", False), ("matchFields", True)):
        for i, item in enumerate(sequence(term.get(section), where=f"{where}.{section}")):
            entry = mapping(item, where=f"{where}.{section}[{i}]")
            operator = str(entry.get("operator", ""))
            if operator not in NODE_SELECTOR_OPERATORS:
                raise InvalidObject(
                    f"{where}.{section}[{i}].operator: {operator!r} is not one of "
                    f"{', '.join(sorted(NODE_SELECTOR_OPERATORS))}"
                )
            values = tuple(str(v) for v in sequence(entry.get("values"), where=where))
            requirements.append(
                Requirement(str(entry.get("key", "")), operator, values, field=is_field)
            )
    return tuple(requirements)


def term_matches(node: Labelled, term: tuple[Requirement, ...]) -> bool:
    """Whether a node meets every requirement of a node selector term; an empty term
    selects nothing, as in the Kubernetes API."""
    return bool(term) and all(requirement_matches(_node_value(node, r), r) for r in term)


def node_matches(node: Labelled, terms: tuple[tuple[Requirement, ...], ...] | None) -> bool:
    """Whether a node matches any of the terms (None: no constraint at all)."""
    return terms is None or any(term_matches(node, term) for term in terms)


def _node_value(node: Labelled, requirement: Requirement) -> str | None:
    if requirement.field:
        return node.name if requirement.key == "metadata.name" else None
    return node.labels.get(requirement.key)
