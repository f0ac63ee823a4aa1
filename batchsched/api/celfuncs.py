"""Kubernetes' CEL quantity and semver libraries, for the engine of `batchsched.api.cel`.

The engine takes no opaque types from Python, so a quantity travels through CEL as the map
`{QUANTITY_TAG: "<exact decimal>"}` and a version as `{SEMVER_TAG: "<version>"}`. Both texts
are canonical (equal values, equal text), so CEL's `==` on them is Kubernetes' `Equal`
(`Quantity.Cmp == 0`; semver equality ignoring build metadata). Semantics follow
k8s.io/apiserver/pkg/cel/library (quantity.go, semverlib.go) v0.36.2.
"""

from __future__ import annotations

import functools
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

_INT64 = (-(2**63), 2**63 - 1)


class CelFunctionError(Exception):
    """A function's runtime error; the engine turns it into the evaluation's error value."""


# -- quantities ------------------------------------------------------------------------------


def parse_signed_quantity(text: object) -> Decimal | str:
    """The exact value of a quantity text, negative ones included, or the error message."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        return QUANTITY_FORMAT_ERROR
    raw = str(text).strip()
    negative = raw.startswith("-")
    try:
        value = parse_quantity(raw.lstrip("+-") if raw[:1] in "+-" else raw, where="quantity")
    except InvalidObject:
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


def _greater(value: object, other: object) -> bool:
    return _compare(value, other) > 0


def _less(value: object, other: object) -> bool:
    return _compare(value, other) < 0


def function_decls() -> list[Any]:
    """The declarations and implementations the engine's environment is built with."""
    tagged = _cel.Type.Map(_cel.Type.STRING, _cel.Type.STRING)
    string, boolean, integer = _cel.Type.STRING, _cel.Type.BOOL, _cel.Type.INT

    def member(name: str, result: Any, params: list[Any], impl: Callable[..., Any]) -> Any:
        return _cel.Overload(name, result, params, is_member=True, impl=impl)

    def function(name: str, result: Any, params: list[Any], impl: Callable[..., Any]) -> Any:
        return _cel.Overload(name, result, params, impl=impl)

    overloads: dict[str, list[Any]] = {
        "quantity": [function("string_to_quantity", tagged, [string], _quantity)],
        "isQuantity": [function("is_quantity_string", boolean, [string], _is_quantity)],
        "semver": [
            function("string_to_semver", tagged, [string], _semver),
            function("string_bool_to_semver", tagged, [string, boolean], _semver),
        ],
        "isSemver": [
            function("is_semver_string", boolean, [string], _is_semver),
            function("is_semver_string_bool", boolean, [string, boolean], _is_semver),
        ],
        "compareTo": [member("k8s_compare_to", integer, [tagged, tagged], _compare)],
        "isGreaterThan": [
            member(
                "k8s_is_greater_than", boolean, [tagged, tagged], lambda a, b: _compare(a, b) > 0
            )
        ],
        "isLessThan": [
            member("k8s_is_less_than", boolean, [tagged, tagged], lambda a, b: _compare(a, b) < 0)
        ],
        "sign": [function("quantity_sign", integer, [tagged], _sign)],
        "asInteger": [member("quantity_get_int", integer, [tagged], _as_integer)],
        "isInteger": [member("quantity_is_integer", boolean, [tagged], _is_integer)],
        "asApproximateFloat": [
            member("quantity_get_float", _cel.Type.DOUBLE, [tagged], lambda q: float(_amount(q)))
        ],
        "add": [
            member("quantity_add", tagged, [tagged, tagged], lambda q, o: _plus(q, o, 1)),
            member("quantity_add_int", tagged, [tagged, integer], lambda q, o: _plus(q, o, 1)),
        ],
        "sub": [
            member("quantity_sub", tagged, [tagged, tagged], lambda q, o: _plus(q, o, -1)),
            member("quantity_sub_int", tagged, [tagged, integer], lambda q, o: _plus(q, o, -1)),
        ],
        "major": [member("semver_major", integer, [tagged], lambda v: _version(v).major)],
        "minor": [member("semver_minor", integer, [tagged], lambda v: _version(v).minor)],
        "patch": [member("semver_patch", integer, [tagged], lambda v: _version(v).patch)],
    }
    return [_cel.FunctionDecl(name, decls) for name, decls in overloads.items()]
