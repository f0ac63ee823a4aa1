"""Volcano's network-topology-aware arguments, read as Volcano v1.15.1 reads them
(getPriorityWeight, getNormalPodConfig and framework.Arguments' GetInt, GetFloat64 and
GetBool): a value Volcano replaces by its default is that default here, logged."""

import logging
import re

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config
from batchsched.plugins.networktopologyaware import NetworkTopologyAware

AT = "c.tiers[0].plugins[1].arguments"
DEFAULTS = {"cpu": 1, "memory": 1}


def plugin_of(arguments: str) -> NetworkTopologyAware:
    config = load_config(
        "tiers:\n- plugins:\n  - {name: predicates}\n  - name: network-topology-aware\n"
        f"    arguments: {arguments}\n",
        source="c",
    )
    [plugin] = [p for tier in config.tiers for p in tier if isinstance(p, NetworkTopologyAware)]
    return plugin


@pytest.mark.parametrize(
    ("arguments", "weight", "resources", "fading"),
    [
        # A negative weight is Volcano's default 1, alone or beside hypernode.* keys.
        ("{weight: -1}", 1, DEFAULTS, 0.8),
        ("{weight: -1, hypernode.binpack.cpu: 1}", 1, DEFAULTS, 0.8),
        # GetInt takes ints alone: a float or a string keeps the default.
        ("{weight: 2.5}", 1, DEFAULTS, 0.8),
        ("{weight: '3'}", 1, DEFAULTS, 0.8),
        ("{weight: 7}", 7, DEFAULTS, 0.8),
        # A resource weight whose resource is not listed is never looked up.
        ("{hypernode.binpack.resources.nvidia.com/gpu: 3}", 1, DEFAULTS, 0.8),
        # CPU and memory weigh by their own keys even when listed.
        (
            "{hypernode.binpack.resources: 'cpu, nvidia.com/gpu', "
            "hypernode.binpack.resources.cpu: 5, hypernode.binpack.cpu: 2}",
            1,
            {"cpu": 2, "memory": 1, "nvidia.com/gpu": 1},
            0.8,
        ),
        # GetFloat64 takes floats and ints; a string keeps the default 0.8, and so
        # does any negative value, -infinity included.
        ("{hypernode.binpack.normal-pod.fading: '0.5'}", 1, DEFAULTS, 0.8),
        ("{hypernode.binpack.normal-pod.fading: 2}", 1, DEFAULTS, 2.0),
        ("{hypernode.binpack.normal-pod.fading: -.inf}", 1, DEFAULTS, 0.8),
        # GetBool takes Go's ParseBool strings; anything else keeps the term on.
        ("{hypernode.binpack.normal-pod.enable: maybe}", 1, DEFAULTS, 0.8),
        ("{weight: 4, hypernode.binpack.normal-pod.enable: 'F'}", 0, DEFAULTS, 0.8),
    ],
)
def test_accepted_as_volcano_accepts(
    arguments: str, weight: int, resources: dict[str, int], fading: float
) -> None:
    plugin = plugin_of(arguments)
    assert (plugin.weight, plugin.resources, plugin.fading) == (weight, resources, fading)


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            "{hypernode.binpack.resources.nvidia.com/gpu: 3}",
            f"{AT}.hypernode.binpack.resources.nvidia.com/gpu has no effect, here as in "
            "Volcano: a resource weighs by it only when hypernode.binpack.resources lists it "
            "(CPU and memory weigh by hypernode.binpack.cpu and hypernode.binpack.memory)",
        ),
        (
            "{hypernode.binpack.normal-pod.fading: '0.5'}",
            f"{AT}.hypernode.binpack.normal-pod.fading: '0.5' is not a number; Volcano keeps "
            "its default 0.8, and so do we",
        ),
        (
            "{weight: -1}",
            f"{AT}.weight: -1 is negative; Volcano takes its default 1, and so do we",
        ),
    ],
)
def test_what_volcano_ignores_is_logged_once(
    arguments: str, line: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        plugin_of(arguments)
    assert [r.getMessage() for r in caplog.records] == [line]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # Volcano keeps NaN and +infinity, and every score it makes is then NaN.
        (
            "{hypernode.binpack.normal-pod.fading: .nan}",
            re.escape(
                f"{AT}.hypernode.binpack.normal-pod.fading: expected a finite number, got nan"
            ),
        ),
        (
            "{hypernode.binpack.normal-pod.fading: .inf}",
            r"normal-pod\.fading: expected a finite number, got inf",
        ),
        # Our own arguments: the plugin's checks, which name the key.
        ("{fading: .nan}", r"fading must be a finite number >= 0, got nan"),
        ("{fading: .inf}", r"fading must be a finite number >= 0, got inf"),
        # Beyond any float: no float to score with.
        (f"{{fading: {10**400}}}", r"fading must be a finite number >= 0"),
        ("{weight: -1, fading: 0.5}", r"weight must be >= 0, got -1"),
        ("{weight: high, resources: {cpu: 1}}", r"weight must be a whole number, got 'high'"),
        # The two formats are not mixed, and a key Volcano does not have is refused.
        ("{hypernode.binpack.cpu: 1, fading: 0.5}", re.escape(f"{AT}.fading: unknown argument")),
        ("{hypernode.binpack.gpu: 1}", r"hypernode\.binpack\.gpu: unknown argument"),
        ("{hypernode.binpack.resources: [a]}", r"resources: expected comma-separated names"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(arguments: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        plugin_of(arguments)
