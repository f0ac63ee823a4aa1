"""Speed of DRA device selectors (batchsched/api/cel.py): compiled once, evaluated per device.

Usage: python -m bench.cel [--nodes 1000] [--devices 8] [--repeats 5]
Prints one JSON object. Each node has `--devices` GPUs of one driver (a quarter of the nodes an
older model and driver version); three selectors, as a DeviceClass and a claim write them, are
evaluated on every device: `cold` with a new SelectorCache (every result evaluated, the device
built for the engine once and shared by its selectors), `cached` again on the same cache (what
a session pays when no slice changed), `changed` after one node in ten published a new pool
generation. Figures are evaluations per second of wall and of CPU time over `--repeats` runs:
median, min and max.
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from decimal import Decimal

from batchsched.api.cel import CelError, Device, SelectorCache, Version, compile_selector

DRIVER = "gpu.example.com"
SELECTORS = [
    f'device.driver == "{DRIVER}"',
    f'device.attributes["{DRIVER}"].model == "A100"'
    f' && device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("530.0.0"))',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
]


def devices(nodes: int, per_node: int, generation: int = 1) -> list[Device]:
    made = []
    for node in range(nodes):
        old = node % 4 == 0
        for index in range(per_node):
            made.append(
                Device(
                    driver=DRIVER,
                    pool=f"node-{node:05d}",
                    name=f"gpu-{index}",
                    # Past the first generation, one node in ten has published a new one.
                    generation=generation if node % 10 == 0 else 1,
                    attributes={
                        "model": "V100" if old else "A100",
                        "index": index,
                        "driverVersion": _version("470.1.0" if old else "535.104.5"),
                        "uuid": f"GPU-{node:05d}-{index}",
                    },
                    capacity={"memory": Decimal((16 if old else 80) * 2**30)},
                )
            )
    return made


def _version(text: str) -> Version:
    parsed = Version.parse(text)
    assert isinstance(parsed, Version)
    return parsed


def _rate(run: Callable[[], int], repeats: int) -> dict[str, dict[str, float]]:
    """Per second of wall time and of this process's CPU time (the machine may be shared)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        count = run()
        wall.append(count / (time.perf_counter() - start))
        cpu.append(count / max(time.process_time() - start_cpu, 1e-9))
    return {"wall": _spread(wall), "cpu": _spread(cpu)}


def _spread(rates: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(rates)),
        "min": round(min(rates)),
        "max": round(max(rates)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fleet = devices(args.nodes, args.devices)
    changed = devices(args.nodes, args.devices, generation=2)

    def evaluate_all(cache: SelectorCache, on: list[Device]) -> int:
        matched = 0
        for device in on:
            for selector in SELECTORS:
                result = cache.matches(selector, device)
                if isinstance(result, CelError):
                    raise SystemExit(f"{selector}: {result.message}")
                matched += result
        return len(on) * len(SELECTORS)

    warm = SelectorCache()
    evaluate_all(warm, fleet)
    compile_start = time.perf_counter()
    for selector in SELECTORS:
        compile_selector(selector)
    compile_ms = (time.perf_counter() - compile_start) * 1000 / len(SELECTORS)

    def changed_run() -> int:
        cache = SelectorCache()
        evaluate_all(cache, fleet)
        before = cache.misses
        start = time.perf_counter()
        evaluate_all(cache, changed)
        changed_seconds.append(time.perf_counter() - start)
        return cache.misses - before

    changed_seconds: list[float] = []
    changed_misses = changed_run()
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "devices": len(fleet),
                "selectors": len(SELECTORS),
                "evaluations": len(fleet) * len(SELECTORS),
                "compile_ms_per_selector": round(compile_ms, 2),
                "cold_per_s": _rate(lambda: evaluate_all(SelectorCache(), fleet), args.repeats),
                "cached_per_s": _rate(lambda: evaluate_all(warm, fleet), args.repeats),
                "changed_generation_evaluations": changed_misses,
                "changed_pass_ms": round(changed_seconds[0] * 1000, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
