"""Volcano's scheduler configuration in batchsched's words.

Plugins and actions keep their names (conformance, drf, nodeorder and overcommit are
batchsched plugins with Volcano's semantics). A plugin entry's `enable<Hook>` flags
(also spelt `enabled<Hook>`) set to false take that plugin's callbacks of that kind out
of the session, where batchsched has the kind; Volcano's binpack arguments
(`binpack.weight`, `binpack.cpu`, ...) become binpack's own, and those of the
`network-topology-aware` plugin (`weight`, `hypernode.binpack.*`) those of batchsched's
plugin of that name (its HyperNode placement of gangs is the core's, listed or not);
the `reserve` action and `reservation` plugin, for Volcano's Reservation objects, are
logged and left out;
`configurations` (per-action arguments) and some plugins' arguments are refused but for
those that change no placement here (ACTION_ARGUMENTS, PLUGIN_ARGUMENTS), logged.
"""

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.api.resources import CPU, MEMORY
from batchsched.framework.plugin import Hook
from batchsched.framework.session import Plugin, Session
from batchsched.framework.topology import CANDIDATE_DOMAINS
from batchsched.plugins.networktopologyaware import DEFAULT_FADING, DEFAULT_WEIGHT
from batchsched.plugins.nodeorder import PART_NAMES

log = logging.getLogger(__name__)

# Volcano's per-plugin flags, by the kind of callback they govern, and the session hooks
# that hold batchsched's callbacks of that kind (as accessors, which mypy checks).
Callbacks = Callable[[Session], Hook[Any]]
HOOKS: dict[str, tuple[Callbacks, ...]] = {
    "JobOrder": (lambda s: s.job_keys,),
    "TaskOrder": (lambda s: s.task_keys,),
    "QueueOrder": (lambda s: s.queue_keys,),
    "Preemptable": (lambda s: s.preemptable,),
    "Reclaimable": (lambda s: s.reclaimable,),
    # Without the gang's readiness no member counts toward a minimum: each is elastic.
    "JobReady": (lambda s: s.ready_checks, lambda s: s.minimum_checks, lambda s: s.shortfalls),
    "JobEnqueued": (lambda s: s.enqueue_checks, lambda s: s.enqueue_headroom),
    "Overused": (lambda s: s.overused_checks,),
    "Allocatable": (lambda s: s.share_checks,),
    "NodeOrder": (lambda s: s.scorers, lambda s: s.normalized_scorers),
    "Predicate": (lambda s: s.filters, lambda s: s.fresh_filters),
}
# Flags for callbacks batchsched has no counterpart of: false is logged as having no
# effect, and why.
UNMAPPED_HOOKS: dict[str, str] = {
    "JobPipelined": "batchsched has no pipelined state: a job is placed or waits",
    "JobStarving": "room for starving gangs is set by starvationThreshold",
    "BestNode": "batchsched takes the best-scored node",
    "TargetJob": "room for starving gangs is set by starvationThreshold",
    "ReservedNodes": "room for starving gangs is set by starvationThreshold",
    "Victim": "batchsched evicts only in preempt and reclaim",
    "NamespaceOrder": "batchsched orders jobs by queue, not by namespace",
    "ClusterOrder": "batchsched schedules one cluster",
    "Preemptive": "which queues may reclaim is said by proportion",
    "HyperNodeOrder": "the core tries the fullest HyperNode that fits first",
    "SubJobOrder": "the core places sub-groups in the order of their policies",
    "SubJobReady": "the core counts a sub-group once its subGroupSize is placed",
    "SubJobPipelined": "batchsched has no pipelined state: a sub-group is placed or waits",
    "HyperNodeGradient": "the core tries HyperNodes tier by tier, lowest first",
}
HIERARCHY = "Hierarchy"
# The plugin whose `enableHierarchy: true` is what batchsched does anyway: its queues
# form a tree by their `parent`.
CAPACITY_PLUGIN = "capacity"
# Volcano's actions and plugins that act on its Reservation objects, which batchsched
# does not read.
RESERVATION_ACTION = "reserve"
RESERVATION_PLUGIN = "reservation"
RESERVATION_WHY = "batchsched does not read Volcano's Reservation objects"
# Volcano's plugin for its HyperNodes (network tiers): batchsched's core places a gang
# stating spec.networkTopology in HyperNodes whether or not it is listed
# (framework/topology.py), packing the fullest one first; the plugin's HyperNode binpack
# of the other pods is batchsched's plugin of that name, whose arguments its own become.
TOPOLOGY_PLUGIN = "network-topology-aware"
HYPERNODE = "hypernode."
HYPERNODE_BINPACK = f"{HYPERNODE}binpack."
NORMAL_POD_ENABLE = f"{HYPERNODE_BINPACK}normal-pod.enable"
NORMAL_POD_FADING = f"{HYPERNODE_BINPACK}normal-pod.fading"
EVICT_DOMAINS = f"{HYPERNODE}gradient.evict.max-hypernodes"
EVICT_DOMAINS_WHY = (
    f"preempt and reclaim look closely at the first {CANDIDATE_DOMAINS} domains of a gang's "
    "tiers, fullest first, whatever the value"
)
# Volcano's network-topology-aware keys beside its resource weights.
VOLCANO_TOPOLOGY_KEYS = frozenset({"weight", NORMAL_POD_ENABLE, NORMAL_POD_FADING, EVICT_DOMAINS})
# The strings Go's strconv.ParseBool reads, which Volcano's GetBool accepts.
GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}
# Arguments of Volcano's plugins and actions that change nothing here, and why.
CLAIMS_ALLOCATED = "pods' resource claims are allocated as kube-scheduler allocates them"
DEVICES_COUNTED = (
    "DRA devices and their consumable capacity are held to queues' deviceclass/ "
    "capability keys whatever the flag (both features are on in Kubernetes 1.36)"
)
PLUGIN_ARGUMENTS = {
    "predicates": {
        "predicate.DynamicResourceAllocationEnable": f"{CLAIMS_ALLOCATED}, whatever the flag"
    },
    "capacity": {
        "capacity.DynamicResourceAllocationEnable": DEVICES_COUNTED,
        "capacity.DRAConsumableCapacityEnable": DEVICES_COUNTED,
    },
}
ACTION_ARGUMENTS = {
    ("allocate", "predicateErrorCacheEnable"): "batchsched caches filter results per pod "
    "shape itself",
    # Volcano's two preempt searches differ in how they look for victims, not in which
    # rules a victim set obeys; batchsched's search is its own (docs/preemption.md).
    ("preempt", "enableTopologyAwarePreemption"): "batchsched's preempt takes the cheapest "
    "victim set over every node, keeping pods' affinity and spread, with either search",
}
# Volcano's source of nodes' measured load, which only its usage plugin reads.
METRICS_KEY = "metrics"
METRICS_WHY = "it is where Volcano's usage plugin reads nodes' load; batchsched places by requests"
# Volcano's binpack arguments.
BINPACK_PREFIX = "binpack."
BINPACK_WEIGHT = f"{BINPACK_PREFIX}weight"


@dataclass(frozen=True, kw_only=True)
class Translated:
    """A configuration in batchsched's own words, where it was read (a ConfigMap's key),
    and per plugin name the hooks (HOOKS) whose callbacks are to be kept out of the
    session (Volcano's enable flags set to false)."""

    raw: Mapping[str, Any]
    source: str
    disabled: Mapping[str, frozenset[str]] = field(default_factory=dict)


def restrict(
    tiers: tuple[tuple[Plugin, ...], ...], disabled: Mapping[str, frozenset[str]]
) -> tuple[tuple[Plugin, ...], ...]:
    """The tiers with each plugin named in `disabled` kept out of those hooks."""
    if not disabled:
        return tiers
    return tuple(
        tuple(
            _Without(plugin, disabled[plugin.name]) if plugin.name in disabled else plugin
            for plugin in tier
        )
        for tier in tiers
    )


class _Without:
    """A plugin whose callbacks of some kinds are dropped, by its name, as soon as it has
    registered them: Volcano's `enablePreemptable: false` and the like."""

    def __init__(self, plugin: Plugin, hooks: frozenset[str]) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.hooks = hooks

    def open(self, session: Session) -> None:
        scored = set(session.scored)
        self.plugin.open(session)
        for hook in self.hooks:
            for callbacks in HOOKS[hook]:
                callbacks(session).drop(self.name)
        if "NodeOrder" in self.hooks:
            # Pods with preferences no plugin scores now wait, saying so.
            session.scored &= scored


def translate(raw: Mapping[str, Any], *, source: str) -> Translated:
    """Volcano's scheduler configuration in batchsched's format, with the hooks its
    enable flags take each plugin's callbacks out of."""
    out = dict(raw)
    if out.pop(METRICS_KEY, None) is not None:
        log.warning("%s.%s has no effect here: %s", source, METRICS_KEY, METRICS_WHY)
    if "configurations" in out:
        _configurations(out.pop("configurations"), source=f"{source}.configurations")
    if isinstance(out.get("actions"), list):
        out["actions"] = _action_entries(out["actions"], source=f"{source}.actions")
    if isinstance(out.get("actions"), str):
        out["actions"] = _volcano_actions(out["actions"], source=source)
    disabled: dict[str, frozenset[str]] = {}
    tiers = out.get("tiers")
    if isinstance(tiers, list):
        out["tiers"] = [
            _volcano_tier(tier, where=f"{source}.tiers[{t}]", disabled=disabled)
            for t, tier in enumerate(tiers)
        ]
        _check_nodeorder(out["tiers"], source=source)
    return Translated(raw=out, source=source, disabled=disabled)


def _volcano_actions(actions: str, *, source: str) -> str:
    names = [name.strip() for name in actions.split(",")]
    if RESERVATION_ACTION in names:
        log.warning(
            "%s.actions: %r has no effect here: %s",
            source,
            RESERVATION_ACTION,
            RESERVATION_WHY,
        )
    return ", ".join(name for name in names if name != RESERVATION_ACTION)


def _action_entries(actions: list[object], *, source: str) -> object:
    """Volcano's first releases listed actions as {name, arguments}: their names, in
    order; arguments are refused by name, as in `configurations`."""
    if not all(isinstance(entry, Mapping) for entry in actions):
        return actions
    names = []
    for i, entry in enumerate(actions):
        assert isinstance(entry, Mapping)
        if "name" not in entry or set(entry) - {"name", "arguments"}:
            raise InvalidObject(f"{source}[{i}]: expected a map with name and arguments")
        for key in entry.get("arguments") or {}:
            raise InvalidObject(
                f"{source}[{i}].arguments.{key}: not supported: batchsched's actions take no "
                "arguments (the overcommit plugin admits beyond what is idle)"
            )
        names.append(str(entry["name"]))
    return ", ".join(names)


def _configurations(raw: object, *, source: str) -> None:
    """Volcano's per-action arguments: those that change no placement here
    (ACTION_ARGUMENTS) are accepted with a logged line."""
    if not isinstance(raw, list):
        raise InvalidObject(f"{source}: expected a list of {{name, arguments}}")
    for i, entry in enumerate(raw):
        where = f"{source}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"name", "arguments"}:
            raise InvalidObject(f"{where}: expected a map with name and arguments")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise InvalidObject(f"{where}.arguments: expected a map")
        for key in arguments:
            why = ACTION_ARGUMENTS.get((str(entry.get("name")), str(key)))
            if why is not None:
                log.warning("%s.arguments.%s has no effect here: %s", where, key, why)
                continue
            accepted = ", ".join(f"{action}'s {name}" for action, name in ACTION_ARGUMENTS)
            raise InvalidObject(
                f"{where}.arguments.{key}: not supported: batchsched's actions take no "
                f"arguments (accepted: {accepted})"
            )


def _volcano_tier(tier: object, *, where: str, disabled: dict[str, frozenset[str]]) -> object:
    if not isinstance(tier, Mapping) or not isinstance(tier.get("plugins"), list):
        return tier
    plugins = []
    for p, entry in enumerate(tier["plugins"]):
        at = f"{where}.plugins[{p}]"
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if name == RESERVATION_PLUGIN:
            log.warning("%s: plugin %r has no effect here: %s", at, name, RESERVATION_WHY)
            continue
        plugins.append(_volcano_plugin(entry, where=at, disabled=disabled))
    return {**tier, "plugins": plugins}


def _volcano_plugin(entry: object, *, where: str, disabled: dict[str, frozenset[str]]) -> object:
    if not isinstance(entry, Mapping):
        return entry
    out = {key: value for key, value in entry.items() if not _flag_hook(key)}
    name = entry.get("name")
    hooks: set[str] = set()
    for key, value in entry.items():
        hook = _flag_hook(key)
        if hook is None:
            continue
        at = f"{where}.{key}"
        if not isinstance(value, bool):
            raise InvalidObject(f"{at}: expected true or false, got {value!r}")
        if hook == HIERARCHY:
            if value and name != CAPACITY_PLUGIN:
                raise InvalidObject(
                    f"{at}: hierarchical sharing is not supported; queues' parents are "
                    "honoured by proportion"
                )
        elif hook in HOOKS:
            if value:
                continue
            if hook == "Predicate" and name == "predicates":
                raise InvalidObject(
                    f"{at}: the predicates plugin's checks cannot be turned off: pods would "
                    "be placed where they do not fit"
                )
            hooks.add(hook)
        elif hook in UNMAPPED_HOOKS:
            if not value:
                log.warning("%s: false has no effect here: %s", at, UNMAPPED_HOOKS[hook])
        else:
            allowed = ", ".join(f"enable{h}" for h in sorted({*HOOKS, *UNMAPPED_HOOKS, HIERARCHY}))
            raise InvalidObject(f"{at}: unknown flag (allowed: {allowed})")
    if hooks and isinstance(name, str):
        disabled[name] = frozenset(hooks)
    arguments = entry.get("arguments")
    if name == "binpack" and isinstance(arguments, Mapping):
        out["arguments"] = _volcano_binpack(arguments, where=f"{where}.arguments")
    if name == TOPOLOGY_PLUGIN and isinstance(arguments, Mapping):
        out["arguments"] = _volcano_topology(arguments, where=f"{where}.arguments")
    if name in PLUGIN_ARGUMENTS and isinstance(arguments, Mapping):
        out["arguments"] = _without_effect(
            arguments, PLUGIN_ARGUMENTS[str(name)], where=f"{where}.arguments"
        )
    return out


def _without_effect(
    arguments: Mapping[str, Any], known: Mapping[str, str], *, where: str
) -> Mapping[str, Any]:
    """`arguments` less those in `known`, each logged with why it has no effect here."""
    for key in arguments:
        if key in known:
            log.warning("%s.%s has no effect here: %s", where, key, known[key])
    return {key: value for key, value in arguments.items() if key not in known}


def _flag_hook(key: object) -> str | None:
    """`JobOrder` for Volcano's `enableJobOrder` or `enabledJobOrder`, else None."""
    if not isinstance(key, str):
        return None
    # Volcano spells one flag `EnabledClusterOrder`.
    for prefix in ("enabled", "enable", "Enabled"):
        rest = key.removeprefix(prefix)
        if rest != key and rest[:1].isupper():
            return rest
    return None


def _volcano_binpack(arguments: Mapping[str, Any], *, where: str) -> Mapping[str, Any]:
    """Volcano's `binpack.weight`, `binpack.cpu`, `binpack.memory`, `binpack.resources`
    and `binpack.resources.<name>` as binpack's `weight` and `resources`; a resource of
    weight 0 is left out, as Volcano leaves it out."""
    if not any(str(key).startswith(BINPACK_PREFIX) for key in arguments):
        return arguments
    foreign = sorted(str(k) for k in arguments if not str(k).startswith(BINPACK_PREFIX))
    if foreign:
        raise InvalidObject(f"{where}.{foreign[0]}: not with Volcano's binpack.* arguments")
    keys = _resource_keys(arguments, BINPACK_PREFIX, frozenset({BINPACK_WEIGHT}), where=where)
    weights = {name: arguments.get(key, 1) for name, key in keys.items()}
    out: dict[str, Any] = {"resources": {n: w for n, w in weights.items() if w != 0}}
    if BINPACK_WEIGHT in arguments:
        out["weight"] = arguments[BINPACK_WEIGHT]
    return out


def _resource_keys(
    arguments: Mapping[str, Any], prefix: str, known: frozenset[str], *, where: str
) -> dict[str, str]:
    """Per resource that has a weight, the key of its weight among Volcano's `<prefix>*`
    arguments: `<prefix>cpu`, `<prefix>memory`, and `<prefix>resources.<name>` for each
    other name listed in `<prefix>resources`, as Volcano's binpack and
    network-topology-aware plugins read them. The weight of a resource not listed is
    logged as having no effect (Volcano ignores it); a key neither that nor in `known`
    is refused."""
    listing = f"{prefix}resources"
    listed = arguments.get(listing, "")
    if not isinstance(listed, str):
        raise InvalidObject(f"{where}.{listing}: expected comma-separated names")
    # CPU and memory weigh by their own keys, listed or not, as Volcano reads them.
    extra = [n.strip() for n in listed.split(",") if n.strip() not in ("", CPU, MEMORY)]
    keys = {CPU: f"{prefix}{CPU}", MEMORY: f"{prefix}{MEMORY}"}
    keys |= {name: f"{listing}.{name}" for name in extra}
    unknown = sorted(str(key) for key in arguments if key not in {*known, listing, *keys.values()})
    unlisted = [key for key in unknown if key.startswith(f"{listing}.")]
    refused = [key for key in unknown if key not in unlisted]
    if refused:
        allowed = ", ".join(sorted({*known, f"{prefix}{CPU}", f"{prefix}{MEMORY}", listing}))
        raise InvalidObject(
            f"{where}.{refused[0]}: unknown argument (allowed: {allowed}, {listing}.<name>)"
        )
    for key in unlisted:
        log.warning(
            "%s.%s has no effect, here as in Volcano: a resource weighs by it only when %s "
            "lists it (CPU and memory weigh by %s%s and %s%s)",
            *(where, key, listing, prefix, CPU, prefix, MEMORY),
        )
    return keys


def _volcano_topology(arguments: Mapping[str, Any], *, where: str) -> Mapping[str, Any]:
    """Volcano's network-topology-aware arguments as batchsched's plugin's, read as
    Volcano reads them: `weight`; `hypernode.binpack.cpu`, `.memory`, `.resources` and
    `.resources.<name>` as `resources`; `normal-pod.fading` as `fading`; and
    `normal-pod.enable: false` as weight 0 (its HyperNode binpack is all it scores here).
    Arguments with a `hypernode.` key are Volcano's, and so is a lone `weight` (a
    Volcano file may hold nothing else; ours means the same but for values Volcano
    reads as its default); any others are batchsched's own."""
    names = {str(key) for key in arguments}
    if names != {"weight"} and not any(name.startswith(HYPERNODE) for name in names):
        return arguments
    keys = _resource_keys(arguments, HYPERNODE_BINPACK, VOLCANO_TOPOLOGY_KEYS, where=where)
    if EVICT_DOMAINS in arguments:
        log.warning("%s.%s has no effect here: %s", where, EVICT_DOMAINS, EVICT_DOMAINS_WHY)
    enabled = _volcano_flag(arguments, NORMAL_POD_ENABLE, where=where)
    weight = _volcano_number(arguments, "weight", DEFAULT_WEIGHT, where=where, whole=True)
    return {
        "weight": weight if enabled else 0,
        "resources": {
            name: _volcano_number(arguments, key, DEFAULT_WEIGHT, where=where, whole=True)
            for name, key in keys.items()
        },
        "fading": _volcano_number(
            arguments, NORMAL_POD_FADING, DEFAULT_FADING, where=where, whole=False
        ),
    }


def _volcano_number(
    arguments: Mapping[str, Any], key: str, default: float, *, where: str, whole: bool
) -> float:
    """The argument as Volcano's GetInt (`whole`) or GetFloat64 reads it: Volcano's
    default where it is missing, of another type or negative (both logged); NaN or
    +infinity, which Volcano keeps and which make all its scores NaN, is refused."""
    if key not in arguments:
        return default
    value = arguments[key]
    kinds = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kinds):
        log.warning(
            "%s.%s: %r is not a %s; Volcano keeps its default %s, and so do we",
            *(where, key, value, "whole number" if whole else "number", default),
        )
        return default
    if isinstance(value, float) and (math.isnan(value) or value == math.inf):
        raise InvalidObject(f"{where}.{key}: expected a finite number, got {value!r}")
    if value < 0:
        log.warning(
            "%s.%s: %r is negative; Volcano takes its default %s, and so do we",
            *(where, key, value, default),
        )
        return default
    return value


def _volcano_flag(arguments: Mapping[str, Any], key: str, *, where: str) -> bool:
    """The argument as Volcano's GetBool reads it (a bool, or a string Go's ParseBool
    reads), else true, Volcano's default, logged as Volcano logs it."""
    value = arguments.get(key, True)
    value = GO_BOOLS.get(value, value) if isinstance(value, str) else value
    if not isinstance(value, bool):
        log.warning(
            "%s.%s: %r is not true or false; Volcano keeps its default true, and so do we",
            *(where, key, arguments[key]),
        )
        return True
    return value


def _check_nodeorder(tiers: list[object], *, source: str) -> None:
    names = {
        entry.get("name")
        for tier in tiers
        if isinstance(tier, Mapping) and isinstance(tier.get("plugins"), list)
        for entry in tier["plugins"]
        if isinstance(entry, Mapping)
    }
    if "nodeorder" in names and names & PART_NAMES:
        both = sorted(str(n) for n in names & PART_NAMES)[0]
        raise InvalidObject(
            f"{source}.tiers: nodeorder already scores with {both}; list one or the other"
        )
