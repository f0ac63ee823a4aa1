"""requirements.lock, which the image installs with --require-hashes, agrees with
pyproject.toml: every runtime dependency and the build backend are pinned within their
ranges, and every pin carries hashes (pip refuses the whole file otherwise)."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\$")


def locked() -> dict[str, tuple[str, int]]:
    """Name -> (version, number of hashes) for each pin in the lock."""
    pins: dict[str, tuple[str, int]] = {}
    name = ""
    for line in (REPO / "requirements.lock").read_text().splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin.group(1))
            pins[name] = (pin.group(2), 0)
        elif line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"requirements.lock: unexpected line {line!r}")
    return pins


def test_every_dependency_is_pinned_within_its_range_with_hashes() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [
        Requirement(text)
        for text in [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    ]
    pins = locked()
    outside = {
        str(requirement): pins.get(canonicalize_name(requirement.name))
        for requirement in wanted
        if canonicalize_name(requirement.name) not in pins
        or not requirement.specifier.contains(pins[canonicalize_name(requirement.name)][0])
    }
    assert outside == {}
    assert [name for name, (_, hashes) in pins.items() if hashes == 0] == []
