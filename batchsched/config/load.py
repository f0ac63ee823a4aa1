"""SchedulerConfig: the YAML users write, checked in full at load.

README's "Configuration reference" documents it.

Every problem is reported with the key it concerns and what is allowed there, before
the scheduler does anything.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batchsched.actions import ACTIONS
from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.api.groups import parse_duration
from batchsched.api.meta import flag
from batchsched.config.peers import translate
from batchsched.config.volcano import restrict
from batchsched.framework.session import Plugin
from batchsched.framework.topology import LabelTier
from batchsched.plugins import PLUGINS

DEFAULT_YAML = """
schedulerName: batch-scheduler
schedulePeriod: 1s
burstWindow: 5ms
starvationThreshold: 5m
actions: "enqueue, allocate, preempt, reclaim, backfill"
preemptOtherSchedulers: false
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - {name: binpack}
  - {name: nodeaffinity}
  - {name: interpodaffinity}
  - {name: podtopologyspread}
  - {name: tainttoleration}
"""

# What every configuration lists: the plugin that holds pods to what they state.
REQUIRED_PLUGIN = "predicates"
TOP_KEYS = {
    "schedulerName",
    "schedulerNames",
    "schedulePeriod",
    "burstWindow",
    "starvationThreshold",
    "actions",
    "tiers",
    "preemptOtherSchedulers",
    "topology",
}
# The plugin that says which pods each evicting action may take: without it the action
# could take none, and would look configured while doing nothing.
VICTIM_PLUGINS = {"preempt": ("priority",), "reclaim": ("proportion", "capacity")}


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig:
    # Pods naming any of these are scheduled; the first names the scheduler itself (its
    # lease, the source of its events).
    scheduler_names: tuple[str, ...]
    schedule_period: float
    # A session called for by an event waits until none has come for this long (at
    # most a few windows after the first, k8s/loop.py), so a burst shares one session.
    burst_window: float = 0.005
    # How long a job may wait before its queue holds resources for it; None: never.
    starvation_seconds: float | None
    actions: tuple[str, ...]
    tiers: tuple[tuple[Plugin, ...], ...] = field(default=())
    # Whether preempt and reclaim may evict pods other schedulers placed.
    preempt_other_schedulers: bool = False
    # Topology tiers from node labels, finest first (framework/topology.py); none:
    # the HyperNodes' tiers.
    topology_tiers: tuple[LabelTier, ...] = ()
    # How long a soft topology ask waits for a domain of the lowest tier that could
    # hold it before it may span domains (framework/topology.py); 0: not at all.
    topology_soft_wait: float = 0.0

    @property
    def scheduler_name(self) -> str:
        return self.scheduler_names[0]


def load_config(text: str, *, source: str = "config") -> SchedulerConfig:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidObject(f"{source}: not valid YAML: {error}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{source}: expected a map of settings at the top level")
    # Volcano's and kube-scheduler's files, in our own words.
    peer = translate(raw, source=source)
    raw, source = peer.raw, peer.source
    defaults = yaml.safe_load(DEFAULT_YAML)
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise InvalidObject(
            f"{source}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(TOP_KEYS))})"
        )
    merged = {**defaults, **raw}
    names = _scheduler_names(raw, merged, source=source)
    starvation = merged["starvationThreshold"]
    actions = _actions(merged["actions"], source=source)
    tiers = restrict(_tiers(merged["tiers"], source=source), peer.disabled)
    listed = {plugin.name for tier in tiers for plugin in tier}
    for action, plugins in VICTIM_PLUGINS.items():
        if action in actions and not listed.intersection(plugins):
            if "actions" not in raw:
                # Not asked for: the default actions leave it out, with its plugin.
                actions = tuple(a for a in actions if a != action)
                continue
            raise InvalidObject(
                f"{source}.actions: the {action} action needs the {' or '.join(plugins)} "
                f"plugin, which says which pods it may evict; list it in tiers or drop {action}"
            )
    period = parse_duration(merged["schedulePeriod"], where=f"{source}.schedulePeriod")
    burst_window = parse_duration(merged["burstWindow"], where=f"{source}.burstWindow")
    if burst_window >= period:
        raise InvalidObject(
            f"{source}.burstWindow: {merged['burstWindow']!r} must be shorter than "
            f"schedulePeriod ({merged['schedulePeriod']!r})"
        )
    return SchedulerConfig(
        scheduler_names=names,
        schedule_period=period,
        burst_window=burst_window,
        starvation_seconds=(
            None
            if starvation in (0, "0", "0s", None)
            else parse_duration(starvation, where=f"{source}.starvationThreshold")
        ),
        actions=actions,
        tiers=tiers,
        preempt_other_schedulers=flag(
            merged["preemptOtherSchedulers"], where=f"{source}.preemptOtherSchedulers"
        ),
        topology_tiers=_topology_tiers(raw.get("topology"), source=f"{source}.topology"),
        topology_soft_wait=_soft_wait(raw.get("topology"), source=f"{source}.topology"),
    )


def _topology(raw: object, *, source: str) -> Mapping[str, object]:
    """`topology: {tiers, softWait}`, both optional."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or set(raw) - {"tiers", "softWait"}:
        raise InvalidObject(f"{source}: expected a map with the keys 'tiers' and 'softWait'")
    return raw


def _soft_wait(raw: object, *, source: str) -> float:
    wait = _topology(raw, source=source).get("softWait")
    if wait in (0, "0", "0s", None):
        return 0.0
    return parse_duration(wait, where=f"{source}.softWait")


def _topology_tiers(raw: object, *, source: str) -> tuple[LabelTier, ...]:
    """`topology.tiers`: each tier a node label key, or {name, nodeLabel}."""
    entries = _topology(raw, source=source).get("tiers") or []
    if not isinstance(entries, list):
        raise InvalidObject(f"{source}.tiers: expected a list of node label keys, finest first")
    tiers: list[LabelTier] = []
    for i, entry in enumerate(entries):
        where = f"{source}.tiers[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry, "nodeLabel": entry}
        if not isinstance(entry, Mapping) or set(entry) - {"name", "nodeLabel"}:
            raise InvalidObject(f"{where}: expected a node label key or {{name, nodeLabel}}")
        key, name = entry.get("nodeLabel"), entry.get("name", entry.get("nodeLabel"))
        if not isinstance(key, str) or not key or not isinstance(name, str) or not name:
            raise InvalidObject(f"{where}.nodeLabel: expected a non-empty node label key")
        for seen in tiers:
            if key == seen.key or name == seen.name:
                raise InvalidObject(f"{where}: tier {name!r} ({key}) is listed twice")
        tiers.append(LabelTier(name=name, key=key))
    return tuple(tiers)


def default_config() -> SchedulerConfig:
    return load_config(DEFAULT_YAML, source="default config")


def read_config(path: str | None) -> SchedulerConfig:
    """The configuration in the file at `path`; the default one when there is none."""
    if path is None:
        return default_config()
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise UnreadableInput(f"{path}: cannot read: {error.strerror}") from None
    return load_config(text, source=path)


def _scheduler_names(
    raw: Mapping[str, Any], merged: Mapping[str, Any], *, source: str
) -> tuple[str, ...]:
    """`schedulerNames` (a list, for serving pods written for other schedulers too) or
    `schedulerName`; not both, which could disagree on which name is the scheduler's own."""
    if "schedulerNames" in raw and "schedulerName" in raw:
        raise InvalidObject(
            f"{source}: schedulerName and schedulerNames are both set; "
            "write schedulerNames alone, its first entry being this scheduler's own name"
        )
    if "schedulerNames" not in raw:
        name = merged["schedulerName"]
        if not isinstance(name, str) or not name:
            raise InvalidObject(f"{source}: schedulerName must be a non-empty string")
        return (name,)
    names = raw["schedulerNames"]
    where = f"{source}.schedulerNames"
    if not isinstance(names, list) or not names:
        raise InvalidObject(f"{where}: expected a non-empty list of scheduler names")
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidObject(f"{where}: {name!r} is not a non-empty string")
    if len(set(names)) < len(names):
        raise InvalidObject(f"{where}: a name is listed twice")
    return tuple(names)


def _actions(raw: object, *, source: str) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise InvalidObject(f"{source}.actions: expected a comma-separated string or a list")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    for name in names:
        if name not in ACTIONS:
            raise InvalidObject(
                f"{source}.actions: unknown action {name!r} (allowed: {', '.join(ACTIONS)})"
            )
    if not names:
        raise InvalidObject(f"{source}.actions: at least one action is needed")
    return names


def _tiers(raw: object, *, source: str) -> tuple[tuple[Plugin, ...], ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidObject(f"{source}.tiers: expected a non-empty list of tiers")
    tiers = []
    seen: set[str] = set()
    for t, tier in enumerate(raw):
        where = f"{source}.tiers[{t}]"
        if not isinstance(tier, Mapping) or set(tier) != {"plugins"}:
            raise InvalidObject(f"{where}: a tier is a map with the single key 'plugins'")
        entries = tier["plugins"]
        if not isinstance(entries, list):
            raise InvalidObject(f"{where}.plugins: expected a list")
        plugins = []
        for p, entry in enumerate(entries):
            plugins.append(_plugin(entry, where=f"{where}.plugins[{p}]", seen=seen))
        tiers.append(tuple(plugins))
    if REQUIRED_PLUGIN not in seen:
        raise InvalidObject(
            f"{source}.tiers: the {REQUIRED_PLUGIN} plugin is required: without it no pod's "
            "resources, node selector, affinity, tolerations, topology spread or volumes "
            "would be checked"
        )
    return tuple(tiers)


def _plugin(entry: object, *, where: str, seen: set[str]) -> Plugin:
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise InvalidObject(f"{where}: expected a map with a 'name'")
    extra = sorted(set(entry) - {"name", "arguments"})
    if extra:
        raise InvalidObject(f"{where}: unknown key {extra[0]!r} (allowed: arguments, name)")
    name = entry["name"]
    if name not in PLUGINS:
        raise InvalidObject(
            f"{where}.name: unknown plugin {name!r} (allowed: {', '.join(sorted(PLUGINS))})"
        )
    if name in seen:
        raise InvalidObject(f"{where}.name: plugin {name!r} is listed twice")
    seen.add(name)
    arguments: Any = entry.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise InvalidObject(f"{where}.arguments: expected a map")
    try:
        return PLUGINS[name](arguments)
    except InvalidObject as error:
        raise InvalidObject(f"{where}: {error}") from None
