"""requirements.lock, which the image installs with --require-hashes, agrees with
pyproject.toml: every runtime dependency and the build backend are pinned within their
ranges, and every pin carries hashes (pip refuses the whole file otherwise).
requirements-dev.lock, which `make venv` installs the same way, adds the dev extras and
pins everything the image has exactly as the image does, so the tests run on what ships."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\$")


def locked(lock: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Name -> (version, its hashes) for each pin in the lock."""
    pins: dict[str, tuple[str, frozenset[str]]] = {}
    name = ""
    for line in (REPO / lock).read_text().splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin.group(1))
            pins[name] = (pin.group(2), frozenset())
        elif line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[name]
            pins[name] = (version, hashes | {line.strip().removesuffix(" \\")})
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"{lock}: unexpected line {line!r}")
    return pins


def _outside(lock: str, texts: list[str]) -> dict[str, object]:
    """Requirements (other than this project's own extras) the lock does not pin within
    their range, and pins without hashes."""
    pins = locked(lock)
    wanted = [Requirement(text) for text in texts]
    outside: dict[str, object] = {
        str(requirement): pins.get(canonicalize_name(requirement.name))
        for requirement in wanted
        if requirement.name != PROJECT["project"]["name"]
        and (
            canonicalize_name(requirement.name) not in pins
            or not requirement.specifier.contains(pins[canonicalize_name(requirement.name)][0])
        )
    }
    outside.update({name: "no hashes" for name, (_, hashes) in pins.items() if not hashes})
    return outside


RUNTIME = [*PROJECT["project"]["dependencies"], *PROJECT["build-system"]["requires"]]


def test_every_dependency_is_pinned_within_its_range_with_hashes() -> None:
    assert _outside("requirements.lock", RUNTIME) == {}


def test_the_dev_lock_pins_the_dev_extras_and_ships_what_the_image_does() -> None:
    extras = PROJECT["project"]["optional-dependencies"]
    assert _outside("requirements-dev.lock", [*RUNTIME, *extras["dev"], *extras["plot"]]) == {}
    dev = locked("requirements-dev.lock")
    image = locked("requirements.lock")
    assert {name: dev.get(name) for name in image} == image
