"""CEL device selectors of Dynamic Resource Allocation, evaluated as kube-scheduler does.

The environment is DRA's (`k8s.io/dynamic-resource-allocation/cel/compile.go`, v0.36.2): one
variable `device` with `driver`, `attributes[domain][id]`, `capacity[domain][id]` (quantities)
and `allowMultipleAllocations`; attribute names without a domain sit under the driver's name;
a domain the device lacks reads as an empty map (so `"x" in device.attributes["d"]` is false and
`device.attributes["d"].x` fails with `no such key: x`). On top of the engine (cel-expr-python,
chosen in docs/benchmarks.md) it adds Kubernetes' `quantity()` and `semver()` libraries.

Nothing here raises on bad input: a selector that does not compile and a device on which it
fails are `CelError` values, worded as kube-scheduler words them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from cel_expr_python import cel as _cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from batchsched.api.celfuncs import (
    Version,
    function_decls,
    parse_signed_quantity,
    quantity_value,
)
from batchsched.api.celtext import default_domains

__all__ = [
    "CelError",
    "Device",
    "ErrorKind",
    "Selector",
    "SelectorCache",
    "Version",
    "compile_selector",
]

# DRA's limit on a selector's length (resourceapi.CELSelectorExpressionMaxLength).
MAX_EXPRESSION_LENGTH = 10 * 1024


class ErrorKind(enum.StrEnum):
    """When a selector failed: kube-scheduler says `CEL compile error` or `CEL runtime error`."""

    COMPILE = "compile"
    RUNTIME = "runtime"


@dataclass(frozen=True, slots=True)
class CelError:
    """A selector that cannot be compiled, or that failed on one device."""

    expression: str
    kind: ErrorKind
    # The engine's message in cel-go's words, e.g. "no such key: model".
    message: str

    def describe(self, owner: str, index: int) -> str:
        """kube-scheduler's sentence: `claim ns/name: selector #0: CEL runtime error: ...`.

        `owner` is `class NAME` for a DeviceClass's selector or `claim NS/NAME` for a claim's.
        """
        return f"{owner}: selector #{index}: CEL {self.kind.value} error: {self.message}"


AttributeValue = bool | int | str | Version


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice, as a selector sees it.

    `attributes` and `capacity` are keyed by the names the slice gives (qualified or not);
    `generation` is whatever changes when the device may have changed (the pool's generation,
    the slice's resourceVersion): cached results for an older generation are not reused.
    `unusable`, when set, is why no selector can be evaluated on the device (an attribute with
    no supported value): every selector on it is that runtime error, as in kube-scheduler.
    """

    driver: str
    pool: str
    name: str
    generation: int | str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Decimal]
    allow_multiple_allocations: bool = False
    unusable: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    @classmethod
    def from_api(
        cls, driver: str, pool: str, generation: int | str, device: Mapping[str, Any]
    ) -> Device:
        """A `resource.k8s.io/v1` device (`{name, attributes, capacity, ...}`).

        An attribute with no supported value makes it `unusable` with kube-scheduler's words
        (`attribute NAME: unsupported attribute value`).
        """
        return _device_from_api(driver, pool, generation, device)


class Selector:
    """A compiled selector; `matches` evaluates it on one device."""

    __slots__ = ("_program", "expression")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program

    def __reduce__(self) -> tuple[Callable[[str], Selector | CelError], tuple[str]]:
        # The engine's program does not pickle; its text compiles to it again.
        return (compile_selector, (self.expression,))

    def matches(self, device: Device) -> bool | CelError:
        """True or False, or the runtime error (missing attribute, wrong type...)."""
        if device.unusable:
            return CelError(self.expression, ErrorKind.RUNTIME, device.unusable)
        return _evaluate(self, _activation(device))


def compile_selector(expression: str) -> Selector | CelError:
    """Compile once; the result is reused for every device."""

    def error(message: str) -> CelError:
        return CelError(expression, ErrorKind.COMPILE, message)

    if len(expression) > MAX_EXPRESSION_LENGTH:
        return error(f"expression is longer than {MAX_EXPRESSION_LENGTH} bytes")
    # The text as written is checked first, so that errors point into it and its type is the
    # one the user wrote; the engine's checker refuses a few macros over a map lookup that the
    # rewritten text (see celtext) passes, so the written text's error counts only if both fail.
    try:
        written: Any = _ENV.compile(expression)
    except RuntimeError as failure:
        written = failure
    try:
        program = _ENV.compile(default_domains(expression))
    except RuntimeError as failure:
        reason = written if isinstance(written, RuntimeError) else failure
        return error("compilation failed: " + _engine_message(str(reason)))
    output = (program if isinstance(written, RuntimeError) else written).return_type().name()
    if output not in ("BOOL", "DYN"):
        return error(f"must evaluate to bool or the unknown type, not {_type_name(output)}")
    return Selector(expression, program)


class SelectorCache:
    """Compiled selectors by expression and their results by (expression, device).

    A device's results are kept while its `generation` stays the same; a new generation drops
    them. One cache serves a whole session, so 1,000 nodes' devices are evaluated once per
    selector until a slice changes.
    """

    def __init__(self) -> None:
        self._compiled: dict[str, Selector | CelError] = {}
        self._results: dict[tuple[str, str, str], _DeviceResults] = {}
        self.hits = 0
        self.misses = 0

    def compile(self, expression: str) -> Selector | CelError:
        compiled = self._compiled.get(expression)
        if compiled is None:
            compiled = self._compiled[expression] = compile_selector(expression)
        return compiled

    def matches(self, expression: str, device: Device) -> bool | CelError:
        """The selector's result on the device, evaluated at most once per generation."""
        entry = self._results.get(device.key)
        if entry is None or entry.generation != device.generation:
            entry = self._results[device.key] = _DeviceResults(device.generation)
        result = entry.results.get(expression)
        if result is not None:
            self.hits += 1
            return result
        self.misses += 1
        compiled = self.compile(expression)
        if isinstance(compiled, CelError):
            result = compiled
        elif device.unusable:
            result = CelError(expression, ErrorKind.RUNTIME, device.unusable)
        else:
            if entry.activation is None:
                entry.activation = _activation(device)
            result = _evaluate(compiled, entry.activation)
        entry.results[expression] = result
        return result

    def forget(self, key: tuple[str, str, str]) -> None:
        """Drop a device that is gone (its slice deleted)."""
        self._results.pop(key, None)

    def update(self, other: SelectorCache) -> None:
        """Take the results another cache holds (a session run in a child process).

        Where the two hold different generations of a device, the other's are kept: either
        way a result answers only for its own generation.
        """
        for key, theirs in other._results.items():
            mine = self._results.get(key)
            if mine is None or mine.generation != theirs.generation:
                self._results[key] = mine = _DeviceResults(theirs.generation)
            mine.results.update(theirs.results)

    def __getstate__(self) -> dict[str, Any]:
        # Results travel; the engine's devices are rebuilt where they are needed.
        results = {
            key: _DeviceResults(r.generation, dict(r.results)) for key, r in self._results.items()
        }
        return {
            "compiled": self._compiled,
            "results": results,
            "hits": self.hits,
            "misses": self.misses,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._compiled = state["compiled"]
        self._results = state["results"]
        self.hits = state["hits"]
        self.misses = state["misses"]


@dataclass(slots=True)
class _DeviceResults:
    generation: int | str
    results: dict[str, bool | CelError] = field(default_factory=dict)
    # The device as the engine takes it, built on the first miss and shared by its selectors.
    activation: Any = None


# -- the engine ------------------------------------------------------------------------------

_ENV = _cel.NewEnv(
    variables={"device": _cel.Type.DYN},
    extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings(), ext_optional.ExtOptional()],
    functions=function_decls(),
)


def _evaluate(selector: Selector, activation: Any) -> bool | CelError:
    try:
        value = selector._program.eval(activation)
    except RuntimeError as failure:
        return CelError(selector.expression, ErrorKind.RUNTIME, _engine_message(str(failure)))
    kind = value.type().name()
    if kind == "ERROR":
        message = _engine_message(str(value.value()))
        return CelError(selector.expression, ErrorKind.RUNTIME, message)
    if kind != "BOOL":
        return CelError(
            selector.expression,
            ErrorKind.RUNTIME,
            f"CEL result of type {_type_name(kind)} could not be converted to bool",
        )
    return bool(value.value())


def _activation(device: Device) -> Any:
    return _ENV.Activation({"device": _device_value(device)})


def _device_value(device: Device) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, ident = _split(name, device.driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, ident = _split(name, device.driver)
        capacity.setdefault(domain, {})[ident] = quantity_value(amount)
    return {
        "driver": device.driver,
        "allowMultipleAllocations": device.allow_multiple_allocations,
        "attributes": attributes,
        "capacity": capacity,
    }


def _attribute_value(value: AttributeValue) -> Any:
    if isinstance(value, Version):
        return value.cel_value()
    return value


def _split(name: str, driver: str) -> tuple[str, str]:
    """DRA's parseQualifiedName: a name without a domain belongs to the driver."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


_CEL_TYPES = {"INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string"}


def _type_name(kind: str) -> str:
    return _CEL_TYPES.get(kind, kind.lower())


def _engine_message(text: str) -> str:
    """cel-cpp's status text in cel-go's words, which kube-scheduler's messages carry."""
    code, sep, rest = text.partition(": ")
    if sep and ((code.isupper() and "_" in code) or code in ("UNKNOWN", "INTERNAL")):
        text = rest
    text = text.removesuffix(" [INVALID_ARGUMENT]")
    if text.startswith("Key not found in map : "):
        key = text.removeprefix("Key not found in map : ")
        return "no such key: " + key.strip('"')
    if text.startswith("No matching overloads found : "):
        return "no such overload: " + text.removeprefix("No matching overloads found : ")
    return text


def _device_from_api(
    driver: str,
    pool: str,
    generation: int | str,
    device: Mapping[str, Any],
) -> Device:
    name = str(device.get("name", ""))
    unusable = ""
    attributes: dict[str, AttributeValue] = {}
    for attr_name, attr in (device.get("attributes") or {}).items():
        value = _api_attribute(attr)
        if isinstance(value, _Unsupported):
            unusable = unusable or f"attribute {attr_name}: {value.message}"
        else:
            attributes[attr_name] = value
    capacity: dict[str, Decimal] = {}
    for cap_name, cap in (device.get("capacity") or {}).items():
        amount = _parse_amount(cap.get("value") if isinstance(cap, Mapping) else None)
        if amount is None:
            # The API server refuses such a slice; a simulated one can still carry it.
            unusable = unusable or f"capacity {cap_name}: {cap!r} is not a quantity"
        else:
            capacity[cap_name] = amount
    return Device(
        driver=driver,
        pool=pool,
        name=name,
        generation=generation,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=bool(device.get("allowMultipleAllocations", False)),
        unusable=unusable,
    )


@dataclass(frozen=True, slots=True)
class _Unsupported:
    """Why an attribute has no value a selector can see, in kube-scheduler's words."""

    message: str = "unsupported attribute value"


def _api_attribute(attr: object) -> AttributeValue | _Unsupported:
    if not isinstance(attr, Mapping):
        return _Unsupported()
    readers: tuple[tuple[str, Callable[[Any], AttributeValue | _Unsupported]], ...] = (
        ("int", lambda v: v if isinstance(v, int) and not isinstance(v, bool) else _Unsupported()),
        ("bool", lambda v: v if isinstance(v, bool) else _Unsupported()),
        ("string", lambda v: v if isinstance(v, str) else _Unsupported()),
        ("version", _api_version),
    )
    for kind, read in readers:
        if attr.get(kind) is not None:
            return read(attr[kind])
    return _Unsupported()


def _api_version(text: object) -> Version | _Unsupported:
    if not isinstance(text, str):
        return _Unsupported()
    version = Version.parse(text)
    if isinstance(version, str):
        return _Unsupported(f"parse semantic version: {version}")
    return version


def _parse_amount(value: object) -> Decimal | None:
    parsed = parse_signed_quantity(value) if isinstance(value, str | int) else None
    return parsed if isinstance(parsed, Decimal) else None
