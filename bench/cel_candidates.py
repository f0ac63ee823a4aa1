"""The Python CEL engines measured for DRA selectors, on the same cases and devices.

Usage (the candidates are not the project's dependencies; install them beside it first):
    python -m venv /tmp/celcand && /tmp/celcand/bin/pip install -e . cel-python \\
        common-expression-language
    /tmp/celcand/bin/python -m bench.cel_candidates [--devices 2000] [--repeats 5]
Prints one JSON object: per engine, how many cases of tests/unit/api/test_cel.py it gets right
as Kubernetes does (with the quantity and semver functions added the way that engine allows)
and the cases it gets wrong, then its speed: microseconds of CPU per evaluation of the three
selectors of bench/cel.py, the selector compiled once, each device turned into the value the
engine takes at each evaluation (median, min and max over `--repeats` runs). `batchsched` is
the chosen engine (cel-expr-python) with what batchsched/api/cel.py adds, through its public
`Selector.matches`; `cel-expr-python` is that engine bare.
"""

import argparse
import importlib
import json
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

from batchsched.api import cel as ours
from batchsched.api.celfuncs import OVERLOADS, CelFunctionError, function_decls

from bench.cel import SELECTORS, devices
from tests.unit.api.test_cel import (
    GPU,
    KUBERNETES_DRA,
    KUBERNETES_LIBRARIES,
    LISTS_SETS_OPTIONALS,
    NOWHERE,
    WRITTEN,
)

Program = Callable[[ours.Device], object]
# An engine compiles a selector into a function of a device, or raises.
Engine = Callable[[str], Program]


def cel_expr_python() -> Engine:
    cel = importlib.import_module("cel_expr_python.cel")
    ext = importlib.import_module("cel_expr_python.ext.ext_bindings")
    strings = importlib.import_module("cel_expr_python.ext.ext_strings")
    optional = importlib.import_module("cel_expr_python.ext.ext_optional")
    env = cel.NewEnv(
        variables={"device": cel.Type.DYN},
        extensions=[ext.ExtBindings(), strings.ExtStrings(), optional.ExtOptional()],
        functions=function_decls(),
    )

    def compile_(expression: str) -> Program:
        program = env.compile(expression)

        def run(device: ours.Device) -> object:
            value = program.eval(data={"device": ours._device_value(device)})
            if value.type().name() == "ERROR":
                raise RuntimeError(value.value())
            return value.value()

        return run

    return compile_


def common_expression_language() -> Engine:
    cel = importlib.import_module("cel")
    stdlib = importlib.import_module("cel.stdlib")
    functions = _by_name()

    # One context with the functions; each evaluation only sets the device in it.
    context = cel.Context()
    stdlib.add_stdlib_to_context(context)
    for name, function in functions.items():
        context.add_function(name, function)

    def compile_(expression: str) -> Program:
        program = cel.compile(expression)

        def run(device: ours.Device) -> object:
            context.add_variable("device", ours._device_value(device))
            return program.execute(context)

        return run

    return compile_


def celpy() -> Engine:
    celpy = importlib.import_module("celpy")
    celtypes = importlib.import_module("celpy.celtypes")
    functions = _by_name()

    class DefaultMap(celtypes.MapType):  # type: ignore[misc,name-defined]
        """DRA's outer maps: a missing domain reads as an empty map."""

        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return celpy.json_to_cel(function(*(_plain(a) for a in args)))

        return call

    env = celpy.Environment()
    wrapped = {name: wrap(function) for name, function in functions.items()}

    def compile_(expression: str) -> Program:
        program = env.program(env.compile(expression), functions=wrapped)

        def run(device: ours.Device) -> object:
            value = celpy.json_to_cel(ours._device_value(device))
            for name in ("attributes", "capacity"):
                value[celtypes.StringType(name)] = DefaultMap(value[celtypes.StringType(name)])
            result = program.evaluate({"device": value})
            if isinstance(result, Exception):
                raise RuntimeError(str(result))
            return result

        return run

    return compile_


def batchsched() -> Engine:
    def compile_(expression: str) -> Program:
        compiled = ours.compile_selector(expression)
        if isinstance(compiled, ours.CelError):
            raise RuntimeError(compiled.message)

        def run(device: ours.Device) -> object:
            result = compiled.matches(device)
            if isinstance(result, ours.CelError):
                raise RuntimeError(result.message)
            return result

        return run

    return compile_


def _by_name() -> dict[str, Callable[..., Any]]:
    """One callable per function name, choosing the overload by the arguments' Python types."""
    by_name: dict[str, list[Callable[..., Any]]] = {}
    for overload in OVERLOADS:
        by_name.setdefault(overload.function, []).append(overload.impl)

    def dispatch(candidates: list[Callable[..., Any]]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            errors = []
            for function in candidates:
                try:
                    return function(*args)
                except (CelFunctionError, TypeError) as failure:
                    errors.append(str(failure))
            raise RuntimeError("; ".join(errors))

        return call

    return {name: dispatch(functions) for name, functions in by_name.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return value


ENGINES: dict[str, Callable[[], Engine]] = {
    "batchsched": batchsched,
    "cel-expr-python": cel_expr_python,
    "common-expression-language": common_expression_language,
    "cel-python": celpy,
}


def cases() -> Iterable[tuple[str, str, ours.Device, object]]:
    for name, expression, device, expected in KUBERNETES_DRA:
        yield name, expression, device, expected
    for expression, expected in [*KUBERNETES_LIBRARIES, *LISTS_SETS_OPTIONALS]:
        yield expression, expression, NOWHERE, expected
    for expression, expected in WRITTEN:
        yield expression, expression, GPU, expected


def correctness(engine: Engine) -> tuple[int, list[str]]:
    right, wrong = 0, []
    for name, expression, device, expected in cases():
        try:
            actual: object = engine(expression)(device)
        except Exception as failure:
            actual = ("error", str(failure))
        if _agrees(actual, expected):
            right += 1
        else:
            wrong.append(name)
    return right, wrong


def _agrees(actual: object, expected: object) -> bool:
    if isinstance(expected, tuple):
        # Kubernetes refuses the selector or the device: any error agrees.
        return isinstance(actual, tuple) or not isinstance(actual, bool)
    # cel-python's booleans are its own BoolType.
    return type(actual).__name__ in ("bool", "BoolType") and bool(actual) is expected


def speed(engine: Engine, count: int, repeats: int) -> dict[str, float] | str:
    values = devices(count // 8 or 1, 8)
    try:
        programs = [engine(selector) for selector in SELECTORS]
        for program in programs:
            program(values[0])
    except Exception as failure:
        return f"cannot run the bench's selectors: {failure}"
    per_eval = []
    for _ in range(repeats):
        start = time.process_time()
        for value in values:
            for program in programs:
                program(value)
        per_eval.append((time.process_time() - start) * 1e6 / (len(values) * len(programs)))
    return {
        "median": round(statistics.median(per_eval), 1),
        "min": round(min(per_eval), 1),
        "max": round(max(per_eval), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    report: dict[str, Any] = {"cases": sum(1 for _ in cases())}
    for name, make in ENGINES.items():
        try:
            engine = make()
        except ImportError as missing:
            report[name] = f"not installed: {missing}"
            continue
        right, wrong = correctness(engine)
        report[name] = {
            "right": right,
            "wrong": wrong,
            "us_cpu_per_evaluation": speed(engine, args.devices, args.repeats),
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
