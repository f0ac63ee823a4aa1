"""Scheduler configuration: what loads, and messages that name the key and what is allowed."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import default_config, load_config
from batchsched.plugins import PLUGINS
from batchsched.plugins.binpack import Binpack
from batchsched.plugins.gang import Gang

ALLOWED_PLUGINS = ", ".join(sorted(PLUGINS))
TOP_KEYS = (
    "actions, burstWindow, preemptOtherSchedulers, schedulePeriod, schedulerName, "
    "schedulerNames, starvationThreshold, tiers, topology"
)
EVERY_ACTION = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
BINPACK_ARGUMENTS = "alwaysScored, functionshape, resources, resourcetoweightmap, shape, weight"


def binpack(arguments: str) -> str:
    return f"tiers:\n- plugins:\n  - name: binpack\n    arguments: {arguments}\n"


def test_several_scheduler_names() -> None:
    config = load_config("schedulerNames: [batch-scheduler, kube-batch]")
    assert config.scheduler_names == ("batch-scheduler", "kube-batch")
    assert config.scheduler_name == "batch-scheduler"


def test_default_config() -> None:
    config = default_config()
    assert config.scheduler_name == "batch-scheduler"
    assert (config.schedule_period, config.starvation_seconds) == (1.0, 300.0)
    assert config.actions == EVERY_ACTION
    assert not config.preempt_other_schedulers
    assert [[p.name for p in tier] for tier in config.tiers] == [
        ["priority", "gang"],
        [
            "predicates",
            "proportion",
            "binpack",
            "nodeaffinity",
            "interpodaffinity",
            "podtopologyspread",
            "tainttoleration",
        ],
    ]


def test_design_example_loads() -> None:
    config = load_config(
        """
schedulerName: batch-scheduler
schedulePeriod: 1s
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - name: binpack
    arguments:
      shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
      resources: {cpu: 1, memory: 1, nvidia.com/gpu: 5}
"""
    )
    plugin = config.tiers[1][2]
    assert isinstance(plugin, Binpack)
    assert plugin.weights == {"cpu": 1, "memory": 1, "nvidia.com/gpu": 5}


@pytest.mark.parametrize(
    ("arguments", "fails"), [("{}", False), ("{scheduleTimeoutAction: Fail}", True)]
)
def test_gang_schedule_timeout_action(arguments: str, fails: bool) -> None:
    """Wait unless the configuration says Fail."""
    config = load_config(
        f"tiers:\n- plugins: [{{name: gang, arguments: {arguments}}}, {{name: predicates}}]"
    )
    plugin = config.tiers[0][0]
    assert isinstance(plugin, Gang)
    assert plugin.fail_on_timeout is fails


@pytest.mark.parametrize(
    ("text", "starvation", "actions"),
    [
        ("starvationThreshold: 0", None, EVERY_ACTION),
        ("starvationThreshold: 90s", 90.0, EVERY_ACTION),
        ("actions: [allocate]", 300.0, ("allocate",)),
        ("actions: ' allocate ,backfill,'", 300.0, ("allocate", "backfill")),
        ("", 300.0, EVERY_ACTION),
        # Tiers without the plugins that pick victims: the default actions leave out
        # the actions that would evict nothing.
        ("tiers: [{plugins: [{name: predicates}]}]", 300.0, ("enqueue", "allocate", "backfill")),
    ],
)
def test_settings(text: str, starvation: float | None, actions: tuple[str, ...]) -> None:
    config = load_config(text)
    assert (config.starvation_seconds, config.actions) == (starvation, actions)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tier: []", f"config: unknown key 'tier' (allowed: {TOP_KEYS})"),
        (
            "topology: [rack]",
            "config.topology: expected a map with the keys 'tiers' and 'softWait'",
        ),
        (
            "topology: {softWait: soon}",
            "config.topology.softWait: 'soon' is not a duration like 30s, 5m or 1h30m",
        ),
        (
            "topology: {tiers: [rack, {nodeLabel: ''}]}",
            "config.topology.tiers[1].nodeLabel: expected a non-empty node label key",
        ),
        (
            "topology: {tiers: [rack, {name: rack, nodeLabel: other}]}",
            "config.topology.tiers[1]: tier 'rack' (other) is listed twice",
        ),
        (
            "burstWindow: 2s",
            "config.burstWindow: '2s' must be shorter than schedulePeriod ('1s')",
        ),
        (
            "tiers:\n- plugins: [{name: gangs}]",
            f"config.tiers[0].plugins[0].name: unknown plugin 'gangs' (allowed: {ALLOWED_PLUGINS})",
        ),
        (
            "actions: enqueue, evict",
            "config.actions: unknown action 'evict' "
            "(allowed: enqueue, allocate, preempt, reclaim, backfill)",
        ),
        (
            "actions: allocate, preempt\ntiers: [{plugins: [{name: predicates}]}]",
            "config.actions: the preempt action needs the priority plugin, which says which "
            "pods it may evict; list it in tiers or drop preempt",
        ),
        (
            "schedulerName: a\nschedulerNames: [a, b]",
            "config: schedulerName and schedulerNames are both set; write schedulerNames "
            "alone, its first entry being this scheduler's own name",
        ),
        (
            "schedulerNames: []",
            "config.schedulerNames: expected a non-empty list of scheduler names",
        ),
        ("schedulerNames: [a, a]", "config.schedulerNames: a name is listed twice"),
        ("schedulerNames: [a, '']", "config.schedulerNames: '' is not a non-empty string"),
        (
            "preemptOtherSchedulers: maybe",
            "config.preemptOtherSchedulers: 'maybe' is not true or false",
        ),
        ("actions: ''", "config.actions: at least one action is needed"),
        ("actions: 3", "config.actions: expected a comma-separated string or a list"),
        (
            binpack("{shapes: []}"),
            "config.tiers[0].plugins[0]: plugin binpack: unknown argument 'shapes' "
            f"(allowed: {BINPACK_ARGUMENTS})",
        ),
        (
            binpack("{shape: [{utilization: 0, score: 0}, {utilization: 100, score: 11}]}"),
            "config.tiers[0].plugins[0]: plugin binpack: shape[1].score must be from 0 to 10, "
            "got 11",
        ),
        (
            binpack("{functionshape: [{utilization: 0, score: 101}]}"),
            "config.tiers[0].plugins[0]: plugin binpack: functionshape[0].score must be "
            "from 0 to 100, got 101",
        ),
        (
            binpack("{shape: [{utilization: 50, score: 1}, {utilization: 50, score: 2}]}"),
            "config.tiers[0].plugins[0]: plugin binpack: shape utilization must increase at "
            "shape[1]",
        ),
        (
            binpack("{shape: [{utilization: 101, score: 1}]}"),
            "config.tiers[0].plugins[0]: plugin binpack: shape[0].utilization must be "
            "from 0 to 100",
        ),
        (
            binpack("{shape: [{utilization: 0}]}"),
            "config.tiers[0].plugins[0]: plugin binpack: shape[0] must have exactly "
            "utilization and score",
        ),
        (
            binpack("{shape: []}"),
            "config.tiers[0].plugins[0]: plugin binpack: shape must be a non-empty list of points",
        ),
        (
            binpack("{shape: [{utilization: 0, score: 0}], functionshape: []}"),
            "config.tiers[0].plugins[0]: plugin binpack: give either shape or functionshape, "
            "not both",
        ),
        (
            binpack("{resources: {cpu: 0}}"),
            "config.tiers[0].plugins[0]: plugin binpack: resources.cpu must be from 1 to 100, "
            "got 0",
        ),
        (
            binpack("{resourcetoweightmap: {cpu: one}}"),
            "config.tiers[0].plugins[0]: plugin binpack: resourcetoweightmap.cpu must be a "
            "whole number, got 'one'",
        ),
        (
            binpack("{resources: {cpu: 1}, resourcetoweightmap: {cpu: 1}}"),
            "config.tiers[0].plugins[0]: plugin binpack: give either resources or "
            "resourcetoweightmap",
        ),
        (
            binpack("{weight: 0}"),
            "config.tiers[0].plugins[0]: plugin binpack: weight must be from 1 to 100, got 0",
        ),
        (binpack("[1]"), "config.tiers[0].plugins[0].arguments: expected a map"),
        (
            "tiers:\n- plugins: [{name: gang, arguments: {strict: true}}]",
            "config.tiers[0].plugins[0]: plugin gang: unknown argument 'strict' "
            "(allowed: scheduleTimeoutAction)",
        ),
        (
            "tiers:\n- plugins: [{name: gang, arguments: {scheduleTimeoutAction: fail}}]",
            "config.tiers[0].plugins[0]: plugin gang: scheduleTimeoutAction must be one of "
            "Wait, Fail, got 'fail'",
        ),
        (
            "tiers:\n- plugins: [{name: gang, args: {}}]",
            "config.tiers[0].plugins[0]: unknown key 'args' (allowed: arguments, name)",
        ),
        (
            "tiers:\n- plugins: [{name: gang}]\n- plugins: [{name: gang}]",
            "config.tiers[1].plugins[0].name: plugin 'gang' is listed twice",
        ),
        ("tiers: []", "config.tiers: expected a non-empty list of tiers"),
        (
            "tiers:\n- plugins: [{name: gang}, {name: binpack}]",
            "config.tiers: the predicates plugin is required: without it no pod's resources, "
            "node selector, affinity, tolerations, topology spread or volumes would be checked",
        ),
        (
            "tiers:\n- [{name: gang}]",
            "config.tiers[0]: a tier is a map with the single key 'plugins'",
        ),
        ("tiers:\n- plugins: {name: gang}", "config.tiers[0].plugins: expected a list"),
        ("tiers:\n- plugins: [gang]", "config.tiers[0].plugins[0]: expected a map with a 'name'"),
        ("schedulerName: ''", "config: schedulerName must be a non-empty string"),
        (
            "schedulePeriod: soon",
            "config.schedulePeriod: 'soon' is not a duration like 30s, 5m or 1h30m",
        ),
        ("starvationThreshold: -5s", "config.starvationThreshold: '-5s' is not a duration"),
        ("[1, 2]", "config: expected a map of settings at the top level"),
        ("a: [", "config: not valid YAML"),
    ],
)
def test_rejected_with_key_and_allowed_values(text: str, message: str) -> None:
    with pytest.raises(InvalidObject) as error:
        load_config(text)
    assert str(error.value).startswith(message)


def test_source_names_the_file() -> None:
    with pytest.raises(InvalidObject, match=r"^/etc/batch\.yaml: unknown key 'tierz'"):
        load_config("tierz: []", source="/etc/batch.yaml")
