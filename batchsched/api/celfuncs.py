"""Kubernetes' CEL libraries the engine of `batchsched.api.cel` lacks: quantity, semver, lists.

The engine takes no opaque types from Python, so a quantity travels through CEL as the map
`{QUANTITY_TAG: "<exact decimal>"}` and a version as `{SEMVER_TAG: "<version>"}`. Both texts
are canonical (equal values, equal text), so CEL's `==` on them is Kubernetes' `Equal`
(`Quantity.Cmp == 0`; semver equality ignoring build metadata). Semantics follow
k8s.io/apiserver/pkg/cel/library (quantity.go, semverlib.go, lists.go) v0.36.2, and cel-go's
Sets extension.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

from cel_expr_python import cel as _cel

from batchsched.api.errors import InvalidObject
from batchsched.api.quantity import parse_quantity

QUANTITY_TAG = "kubernetes.Quantity"
SEMVER_TAG = "kubernetes.Semver"

# k8s.io/apimachinery's message for a text that is not a quantity (ErrFormatWrong).
QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

# The texts that pass that expression but whose suffix is unknown get another message.
_QUANTITY_SHAPE = re.compile(r"[+-]?[0-9.]+[eEinumkKMGTP]*[-+]?[0-9]*")
_INT64 = (-(2**63), 2**63 - 1)


class CelFunctionError(Exception):
    """A function's runtime error; the engine turns it into the evaluation's error value."""


# -- quantities ------------------------------------------------------------------------------


def parse_signed_quantity(text: object) -> Decimal | str:
    """The exact value of a quantity text, negative ones included, or the error message."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        return QUANTITY_FORMAT_ERROR
    raw = str(text)
    negative = raw.startswith("-")
    # Kubernetes takes no spaces around a quantity, which parse_quantity forgives.
    if raw != raw.strip():
        return QUANTITY_FORMAT_ERROR
    try:
        value = parse_quantity(raw[1:] if raw[:1] in "+-" else raw, where="quantity")
    except InvalidObject:
        if _QUANTITY_SHAPE.fullmatch(raw):
            return "unable to parse quantity's suffix"
        return QUANTITY_FORMAT_ERROR
    # Kubernetes keeps nano precision and rounds anything finer up (away from zero).
    nanos = (value * 10**9).to_integral_value(rounding="ROUND_CEILING")
    value = nanos / Decimal(10**9)
    return -value if negative else value


def quantity_value(amount: Decimal) -> dict[str, str]:
    """The CEL value standing for a quantity."""
    with localcontext() as context:
        context.prec = 60
        return {QUANTITY_TAG: str(amount.normalize())}


def _amount(value: object) -> Decimal:
    if isinstance(value, dict) and QUANTITY_TAG in value:
        with localcontext() as context:
            context.prec = 60
            return Decimal(value[QUANTITY_TAG])
    raise CelFunctionError("no such overload")


def _quantity(text: str) -> dict[str, str]:
    value = parse_signed_quantity(text)
    if isinstance(value, str):
        raise CelFunctionError(value)
    return quantity_value(value)


def _is_quantity(text: str) -> bool:
    return not isinstance(parse_signed_quantity(text), str)


def _as_integer(value: object) -> int:
    amount = _amount(value)
    if amount != amount.to_integral_value() or not _INT64[0] <= amount <= _INT64[1]:
        raise CelFunctionError("cannot convert value to integer")
    return int(amount)


def _is_integer(value: object) -> bool:
    amount = _amount(value)
    return amount == amount.to_integral_value() and _INT64[0] <= amount <= _INT64[1]


def _sign(value: object) -> int:
    amount = _amount(value)
    return (amount > 0) - (amount < 0)


def _plus(value: object, other: object, factor: int) -> dict[str, str]:
    addend = Decimal(other) if isinstance(other, int) else _amount(other)
    with localcontext() as context:
        context.prec = 60
        return quantity_value(_amount(value) + factor * addend)


# -- semantic versions -----------------------------------------------------------------------

_NUMBER = re.compile(r"0|[1-9][0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]+")


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version, compared as github.com/blang/semver/v4 (which Kubernetes uses)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @staticmethod
    def parse(text: str, normalize: bool = False) -> Version | str:
        """The version, or blang/semver's error message. `normalize` is `semver(s, true)`."""
        if normalize:
            normalized = _normalize(text)
            if normalized is None:
                return "short version cannot contain PreRelease/Build meta data"
            text = normalized
        return _parse_version(text)

    def compare(self, other: Version) -> int:
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for left, right in zip(self.pre, other.pre, strict=False):
            if left != right:
                return _compare_prerelease(left, right)
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def text(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(self.pre) if self.pre else "")

    def cel_value(self) -> dict[str, str]:
        # Build metadata is left out: semver equality ignores it.
        return {SEMVER_TAG: self.text()}


def _compare_prerelease(left: str, right: str) -> int:
    left_number, right_number = left.isdigit(), right.isdigit()
    if left_number and right_number:
        return -1 if int(left) < int(right) else 1
    if left_number != right_number:
        return -1 if left_number else 1
    return -1 if left < right else 1


def _parse_version(text: str) -> Version | str:
    if not text:
        return "Version string empty"
    core, _, build_text = text.partition("+")
    core, _, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        return "No Major.Minor.Patch elements found"
    numbers = []
    for label, part in zip(("Major", "Minor", "Patch"), parts, strict=True):
        if not part.isdigit() or not part.isascii():
            return f"Invalid character(s) found in {label.lower()} number {part!r}"
        if len(part) > 1 and part.startswith("0"):
            return f"{label} number must not contain leading zeroes {part!r}"
        numbers.append(int(part))
    pre: tuple[str, ...] = ()
    if "-" in text.partition("+")[0]:
        pre = tuple(pre_text.split("."))
        for ident in pre:
            if not _IDENT.fullmatch(ident):
                return f"Invalid character(s) found in prerelease {ident!r}"
            if ident.isdigit() and not _NUMBER.fullmatch(ident):
                return f"Numeric PreRelease version must not contain leading zeroes {ident!r}"
    build: tuple[str, ...] = ()
    if "+" in text:
        build = tuple(build_text.split("."))
        for ident in build:
            if not _IDENT.fullmatch(ident):
                return f"Invalid character(s) found in build meta data {ident!r}"
    return Version(numbers[0], numbers[1], numbers[2], pre, build)


def _normalize(text: str) -> str | None:
    """Kubernetes' normalizeAndParse: no `v`, leading zeros dropped, `1.2` read as `1.2.0`."""
    parts = text.removeprefix("v").split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            trimmed = part.lstrip("0")
            if not trimmed or not trimmed[0].isdigit():
                trimmed = "0" + trimmed
            parts[index] = trimmed
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            return None
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


@functools.lru_cache(maxsize=4096)
def _version_from_text(text: str) -> Version:
    version = _parse_version(text)
    if isinstance(version, str):
        raise CelFunctionError(version)
    return version


def _version(value: object) -> Version:
    if isinstance(value, dict) and SEMVER_TAG in value:
        return _version_from_text(value[SEMVER_TAG])
    raise CelFunctionError("no such overload")


def _semver(text: str, normalize: bool = False) -> dict[str, str]:
    version = Version.parse(text, normalize)
    if isinstance(version, str):
        raise CelFunctionError(version)
    return version.cel_value()


def _is_semver(text: str, normalize: bool = False) -> bool:
    return not isinstance(Version.parse(text, normalize), str)


# -- both: the comparisons are shared by quantities and versions ------------------------------


def _compare(value: object, other: object) -> int:
    if isinstance(value, dict) and QUANTITY_TAG in value:
        mine, theirs = _amount(value), _amount(other)
        return (mine > theirs) - (mine < theirs)
    return _version(value).compare(_version(other))


# -- Kubernetes' Lists library and cel-go's Sets extension -----------------------------------


def _kind(value: object) -> str:
    """CEL's type family of a plain value: numbers compare across int and double."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _comparable(items: list[Any], name: str) -> list[Any]:
    kinds = {_kind(item) for item in items}
    if len(kinds) > 1 or kinds & {"dict", "list"}:
        raise CelFunctionError(f"no such overload: {name}")
    return items


def _is_sorted(items: list[Any]) -> bool:
    _comparable(items, "isSorted")
    return all(left <= right for left, right in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    if not items:
        return 0
    if {_kind(item) for item in items} != {"number"}:
        raise CelFunctionError("no such overload: sum")
    if {type(item) for item in items} == {int}:
        return sum(items)
    return float(sum(items))


def _extreme(name: str, pick: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    def extreme(items: list[Any]) -> Any:
        if not items:
            raise CelFunctionError(f"{name} called on empty list")
        return pick(_comparable(items, name))

    return extreme


def _same(left: object, right: object) -> bool:
    """CEL equality: `true` is not `1`, but `1` is `1.0`."""
    return _kind(left) == _kind(right) and left == right


def _contains_all(items: list[Any], wanted: list[Any]) -> bool:
    return all(any(_same(item, want) for item in items) for want in wanted)


def _equivalent(left: list[Any], right: list[Any]) -> bool:
    return _contains_all(left, right) and _contains_all(right, left)


def _intersects(left: list[Any], right: list[Any]) -> bool:
    return any(_same(item, other) for item in left for other in right)


def _greater(value: object, other: object) -> bool:
    return _compare(value, other) > 0


def _less(value: object, other: object) -> bool:
    return _compare(value, other) < 0


@dataclass(frozen=True, slots=True)
class Overload:
    """One overload of a Kubernetes function: `Q` stands for a quantity or a version."""

    function: str
    id: str
    result: str
    params: tuple[str, ...]
    member: bool
    impl: Callable[..., Any]


OVERLOADS = (
    Overload("quantity", "string_to_quantity", "Q", ("string",), False, _quantity),
    Overload("isQuantity", "is_quantity_string", "bool", ("string",), False, _is_quantity),
    Overload("semver", "string_to_semver", "Q", ("string",), False, _semver),
    Overload("semver", "string_bool_to_semver", "Q", ("string", "bool"), False, _semver),
    Overload("isSemver", "is_semver_string", "bool", ("string",), False, _is_semver),
    Overload("isSemver", "is_semver_string_bool", "bool", ("string", "bool"), False, _is_semver),
    Overload("compareTo", "k8s_compare_to", "int", ("Q", "Q"), True, _compare),
    Overload("isGreaterThan", "k8s_is_greater_than", "bool", ("Q", "Q"), True, _greater),
    Overload("isLessThan", "k8s_is_less_than", "bool", ("Q", "Q"), True, _less),
    Overload("sign", "quantity_sign", "int", ("Q",), False, _sign),
    Overload("asInteger", "quantity_get_int", "int", ("Q",), True, _as_integer),
    Overload("isInteger", "quantity_is_integer", "bool", ("Q",), True, _is_integer),
    Overload(
        "asApproximateFloat",
        "quantity_get_float",
        "double",
        ("Q",),
        True,
        lambda q: float(_amount(q)),
    ),
    Overload("add", "quantity_add", "Q", ("Q", "Q"), True, lambda q, o: _plus(q, o, 1)),
    Overload("add", "quantity_add_int", "Q", ("Q", "int"), True, lambda q, o: _plus(q, o, 1)),
    Overload("sub", "quantity_sub", "Q", ("Q", "Q"), True, lambda q, o: _plus(q, o, -1)),
    Overload("sub", "quantity_sub_int", "Q", ("Q", "int"), True, lambda q, o: _plus(q, o, -1)),
    Overload("major", "semver_major", "int", ("Q",), True, lambda v: _version(v).major),
    Overload("minor", "semver_minor", "int", ("Q",), True, lambda v: _version(v).minor),
    Overload("patch", "semver_patch", "int", ("Q",), True, lambda v: _version(v).patch),
    Overload("isSorted", "list_is_sorted", "bool", ("list",), True, _is_sorted),
    Overload("sum", "list_sum", "dyn", ("list",), True, _sum),
    Overload("min", "list_min", "dyn", ("list",), True, _extreme("min", min)),
    Overload("max", "list_max", "dyn", ("list",), True, _extreme("max", max)),
    Overload(
        "sets.contains", "list_sets_contains_list", "bool", ("list", "list"), False, _contains_all
    ),
    Overload(
        "sets.equivalent", "list_sets_equivalent_list", "bool", ("list", "list"), False, _equivalent
    ),
    Overload(
        "sets.intersects", "list_sets_intersects_list", "bool", ("list", "list"), False, _intersects
    ),
)


def function_decls() -> list[Any]:
    """The engine's declarations of OVERLOADS, with their implementations."""
    types = {
        "Q": _cel.Type.Map(_cel.Type.STRING, _cel.Type.STRING),
        "string": _cel.Type.STRING,
        "bool": _cel.Type.BOOL,
        "int": _cel.Type.INT,
        "double": _cel.Type.DOUBLE,
        "list": _cel.Type.List(_cel.Type.DYN),
        "dyn": _cel.Type.DYN,
    }
    by_function: dict[str, list[Any]] = {}
    for o in OVERLOADS:
        params = [types[p] for p in o.params]
        overload = _cel.Overload(o.id, types[o.result], params, is_member=o.member, impl=o.impl)
        by_function.setdefault(o.function, []).append(overload)
    return [_cel.FunctionDecl(name, overloads) for name, overloads in by_function.items()]
