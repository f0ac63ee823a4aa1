"""kube-scheduler's KubeSchedulerConfiguration (kubescheduler.config.k8s.io, v1alpha1 to
v1) in batchsched's words, with scheduler-plugins' Coscheduling.

The profile's score plugins become batchsched's scorers with their weights,
RequestedToCapacityRatio (as a plugin, or as NodeResourcesFit's scoring strategy) and
MostAllocated becoming binpack; its scheduler names are served; settings of the process
(leader election, client connection, sampling of nodes, back-off...) are logged; filters
cannot be turned off, and policies, extenders and other plugins are refused. Queues and
gangs keep batchsched's defaults (priority, gang, proportion), which kube-scheduler has
no word for. Coscheduling is what the gang plugin always does; its arguments are logged.
"""

import logging
from collections.abc import Mapping
from typing import Any

from batchsched.api.errors import InvalidObject

log = logging.getLogger(__name__)

KUBE_GROUP = "kubescheduler.config.k8s.io/"
KUBE_VERSIONS = ("v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1beta3", "v1")
DEFAULT_SCHEDULER = "default-scheduler"
# Settings of kube-scheduler's process rather than of its placements, and why each has
# no effect here.
KUBE_PROCESS_KEYS: dict[str, str] = {
    "leaderElection": "leader election is set by `batchsched run --leader-elect` and its "
    "--lease flags",
    "clientConnection": "the API server is reached through --kubeconfig (default: in-cluster)",
    "percentageOfNodesToScore": "batchsched scores every node that fits",
    "parallelism": "batchsched scores nodes as arrays, not in goroutines",
    "podInitialBackoffSeconds": "pending pods are tried again every schedulePeriod",
    "podMaxBackoffSeconds": "pending pods are tried again every schedulePeriod",
    "healthzBindAddress": "health and metrics are served by `batchsched run`",
    "metricsBindAddress": "health and metrics are served by `batchsched run`",
    "enableProfiling": "batchsched serves no profiling endpoints",
    "enableContentionProfiling": "batchsched serves no profiling endpoints",
    "delayCacheUntilActive": "batchsched fills its cache once it leads",
    "bindTimeoutSeconds": "binds are retried by batchsched's operator",
}
# Score plugins, by every name kube-scheduler gave them: the canonical name.
KUBE_SCORES = {
    "NodeResourcesLeastAllocated": "LeastAllocated",
    "LeastRequestedPriority": "LeastAllocated",
    "NodeResourcesMostAllocated": "MostAllocated",
    "MostRequestedPriority": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
    "RequestedToCapacityRatioPriority": "RequestedToCapacityRatio",
    "NodeResourcesBalancedAllocation": "BalancedAllocation",
    "BalancedResourceAllocation": "BalancedAllocation",
    "NodeAffinity": "NodeAffinity",
    "NodeAffinityPriority": "NodeAffinity",
    "InterPodAffinity": "InterPodAffinity",
    "InterPodAffinityPriority": "InterPodAffinity",
    "PodTopologySpread": "PodTopologySpread",
    "EvenPodsSpreadPriority": "PodTopologySpread",
    "TaintToleration": "TaintToleration",
    "TaintTolerationPriority": "TaintToleration",
    "ImageLocality": "ImageLocality",
    "ImageLocalityPriority": "ImageLocality",
    "SelectorSpread": "SelectorSpread",
    "DefaultPodTopologySpread": "SelectorSpread",
    "SelectorSpreadPriority": "SelectorSpread",
    "NodePreferAvoidPods": "NodePreferAvoidPods",
    "NodePreferAvoidPodsPriority": "NodePreferAvoidPods",
    "VolumeBinding": "VolumeBinding",
}
# kube-scheduler's default profile's scores and weights; NodeResourcesFit scores by its
# strategy, LeastAllocated unless its arguments say otherwise.
KUBE_DEFAULT_SCORES = {
    "NodeResourcesFit": 1,
    "BalancedAllocation": 1,
    "ImageLocality": 1,
    "InterPodAffinity": 2,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "TaintToleration": 3,
}
FIT_STRATEGIES = {
    "LeastAllocated": "LeastAllocated",
    "MostAllocated": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
}
# Scores batchsched cannot compute, and why.
KUBE_UNSCORED = {
    "ImageLocality": "batchsched does not read the images nodes hold",
    "SelectorSpread": "it finds a pod's peers through Services and ReplicaSets, which "
    "batchsched does not watch",
    "NodePreferAvoidPods": "the preferAvoidPods node annotation is gone from Kubernetes",
    "VolumeBinding": "volumes are bound where the other scores place the pod",
}
# The plugin each computed score becomes.
KUBE_PLUGINS = {
    "LeastAllocated": "leastallocated",
    "MostAllocated": "binpack",
    "RequestedToCapacityRatio": "binpack",
    "BalancedAllocation": "balancedallocation",
    "NodeAffinity": "nodeaffinity",
    "InterPodAffinity": "interpodaffinity",
    "PodTopologySpread": "podtopologyspread",
    "TaintToleration": "tainttoleration",
}
# Extension points batchsched runs only its own plugins at: kube-scheduler's default
# plugins there may be listed as enabled (they are what predicates does), never disabled.
KUBE_OTHER_POINTS = (
    "queueSort",
    "preEnqueue",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
KUBE_PREEMPTION = "DefaultPreemption"
# kube-scheduler's own plugins whose checks batchsched always applies in its own way
# (predicates, binding): listing them as enabled changes nothing.
KUBE_BUILTINS = frozenset(
    {
        "PrioritySort",
        "SchedulingGates",
        "NodeUnschedulable",
        "NodeName",
        "NodePorts",
        "NodeResourcesFit",
        "NodeAffinity",
        "TaintToleration",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DefaultPreemption",
        "DefaultBinder",
    }
)
# scheduler-plugins' gang plugin: what batchsched's gang plugin always does.
COSCHEDULING = "Coscheduling"
# Its arguments, none of which has an effect here, and why.
COSCHEDULING_ARGUMENTS = {
    "permitWaitingTimeSeconds": "a gang is placed whole in one session, so no member waits "
    "in Permit for the rest; a PodGroup's scheduleTimeoutSeconds bounds its whole wait",
    "podGroupBackoffSeconds": "a gang that does not fit is tried again every session, "
    "undone entirely in between",
    "podGroupRejectPercentage": "a gang is placed whole in one session or not at all, so no "
    "placed member is left waiting to be rejected",
    "podGroupGCIntervalSeconds": "no PodGroup state is kept between sessions",
    "podGroupExpirationTimeSeconds": "no PodGroup state is kept between sessions",
    "deniedPGExpirationTimeSeconds": "no PodGroup state is kept between sessions",
    "kubeConfigPath": "batchsched run takes --kubeconfig",
    "kubeMaster": "batchsched run takes --kubeconfig",
}
DEFAULT_ACTIONS_WITHOUT_PREEMPT = "enqueue, allocate, reclaim, backfill"


def translate(raw: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """A KubeSchedulerConfiguration in batchsched's format: its profiles' scheduler names
    and one set of tiers they all place pods by."""
    version = str(raw.get("apiVersion", "")).removeprefix(KUBE_GROUP)
    if version not in KUBE_VERSIONS:
        raise InvalidObject(
            f"{source}.apiVersion: unknown {raw.get('apiVersion')!r} (allowed: "
            f"{', '.join(KUBE_GROUP + v for v in KUBE_VERSIONS)})"
        )
    preempt = True
    profiles: list[Mapping[str, Any]] = []
    for key, value in raw.items():
        where = f"{source}.{key}"
        if key in ("apiVersion", "kind"):
            continue
        if key in KUBE_PROCESS_KEYS:
            log.warning("%s has no effect here: %s", where, KUBE_PROCESS_KEYS[key])
        elif key == "disablePreemption":
            if not isinstance(value, bool):
                raise InvalidObject(f"{where}: expected true or false")
            preempt = preempt and not value
        elif key == "profiles":
            if not isinstance(value, list) or not value:
                raise InvalidObject(f"{where}: expected a non-empty list of profiles")
            profiles = [_mapping(p, where=f"{where}[{i}]") for i, p in enumerate(value)]
        elif key not in ("schedulerName", "plugins", "pluginConfig"):
            raise InvalidObject(
                f"{where}: not supported (batchsched reads schedulerName, profiles, plugins, "
                f"pluginConfig and disablePreemption; it logs and ignores "
                f"{', '.join(sorted(KUBE_PROCESS_KEYS))})"
            )
    top = {k: raw[k] for k in ("schedulerName", "plugins", "pluginConfig") if k in raw}
    if top and profiles:
        raise InvalidObject(
            f"{source}: {sorted(top)[0]} and profiles are both set; write profiles alone"
        )
    if not profiles:
        profiles = [top]
        where_profiles = [source]
    else:
        where_profiles = [f"{source}.profiles[{i}]" for i in range(len(profiles))]
    names: list[str] = []
    tiers: list[dict[str, Any]] | None = None
    for profile, where in zip(profiles, where_profiles, strict=True):
        name, profile_tiers, profile_preempt = _kube_profile(profile, where=where)
        if tiers is not None and profile_tiers != tiers:
            raise InvalidObject(
                f"{where}: profiles that place pods differently are not supported: batchsched "
                "serves every scheduler name with one configuration"
            )
        tiers = profile_tiers
        preempt = preempt and profile_preempt
        if name in names:
            raise InvalidObject(f"{where}.schedulerName: {name!r} is named twice")
        names.append(name)
    out: dict[str, Any] = {"schedulerNames": names, "tiers": tiers}
    if not preempt:
        out["actions"] = DEFAULT_ACTIONS_WITHOUT_PREEMPT
    return out


def _kube_profile(
    profile: Mapping[str, Any], *, where: str
) -> tuple[str, list[dict[str, Any]], bool]:
    """The profile's scheduler name, tiers and whether it preempts."""
    for key in profile:
        if key == "percentageOfNodesToScore":
            log.warning("%s.%s has no effect here: %s", where, key, KUBE_PROCESS_KEYS[key])
        elif key not in ("schedulerName", "plugins", "pluginConfig"):
            raise InvalidObject(
                f"{where}.{key}: not supported (allowed: schedulerName, plugins, pluginConfig, "
                "percentageOfNodesToScore)"
            )
    name = profile.get("schedulerName", DEFAULT_SCHEDULER)
    if not isinstance(name, str) or not name:
        raise InvalidObject(f"{where}.schedulerName: expected a non-empty string")
    config = _plugin_config(profile.get("pluginConfig", []), where=f"{where}.pluginConfig")
    scores = dict(KUBE_DEFAULT_SCORES)
    preempt = True
    plugins = _mapping(profile.get("plugins") or {}, where=f"{where}.plugins")
    for point, sets in plugins.items():
        at = f"{where}.plugins.{point}"
        sets = _mapping(sets or {}, where=at)
        extra = sorted(set(sets) - {"enabled", "disabled"})
        if extra:
            raise InvalidObject(f"{at}.{extra[0]}: unknown key (allowed: disabled, enabled)")
        disabled = _names(sets.get("disabled"), where=f"{at}.disabled")
        enabled = _names(sets.get("enabled"), where=f"{at}.enabled")
        if point in ("score", "multiPoint"):
            _kube_scores(scores, disabled, enabled, where=at, strict=point == "score")
        elif point in KUBE_OTHER_POINTS:
            sorted_by_gang = point == "queueSort" and COSCHEDULING in dict(enabled)
            for i, (plugin, _) in enumerate(disabled):
                if point == "postFilter" and plugin in (KUBE_PREEMPTION, "*"):
                    preempt = False
                elif sorted_by_gang and plugin in ("PrioritySort", "*"):
                    # Coscheduling's order (priority, then the group's creation) is the
                    # gang and priority plugins' own.
                    continue
                elif point != "preScore" or _score_name(plugin) is None:
                    raise InvalidObject(
                        f"{at}.disabled[{i}]: {plugin!r} cannot be turned off: batchsched "
                        "always applies its own filters and binds"
                    )
            for i, (plugin, _) in enumerate(enabled):
                if _applied_anyway(plugin, where=f"{at}.enabled[{i}]"):
                    continue
                if point != "preScore" or _score_name(plugin) is None:
                    raise InvalidObject(
                        f"{at}.enabled[{i}]: {plugin!r} is not supported: batchsched runs "
                        "only its own plugins at this extension point"
                    )
        else:
            raise InvalidObject(
                f"{at}: unknown extension point (allowed: multiPoint, score, "
                f"{', '.join(KUBE_OTHER_POINTS)})"
            )
    return name, _kube_tiers(scores, config, where=where), preempt


def _kube_scores(
    scores: dict[str, int],
    disabled: list[tuple[str, int | None]],
    enabled: list[tuple[str, int | None]],
    *,
    where: str,
    strict: bool,
) -> None:
    """Apply a profile's score (or multiPoint) plugin lists to `scores`. Under
    multiPoint, plugins that do not score are kube-scheduler's filters, which are always
    applied: they may be enabled, not disabled."""
    for i, (plugin, _) in enumerate(disabled):
        if plugin == "*":
            scores.clear()
            continue
        name = _score_name(plugin)
        if name is None:
            raise InvalidObject(
                f"{where}.disabled[{i}]: {plugin!r} "
                + ("is not a score plugin batchsched knows" if strict else "cannot be turned off")
            )
        scores.pop(name, None)
        if name in FIT_STRATEGIES:
            scores.pop("NodeResourcesFit", None)
    for i, (plugin, weight) in enumerate(enabled):
        name = _score_name(plugin)
        if name is None:
            if strict or not _applied_anyway(plugin, where=f"{where}.enabled[{i}]"):
                raise InvalidObject(
                    f"{where}.enabled[{i}]: {plugin!r} is not a score plugin batchsched knows "
                    f"(known: {', '.join(sorted({'NodeResourcesFit', *KUBE_SCORES}))})"
                )
            continue
        scores[name] = weight if weight is not None else KUBE_DEFAULT_SCORES.get(name, 1)


def _applied_anyway(plugin: str, *, where: str) -> bool:
    """Whether `plugin`, listed as enabled, is what batchsched does anyway: one of
    kube-scheduler's filters or its binder, or scheduler-plugins' Coscheduling."""
    if plugin == COSCHEDULING:
        log.warning("%s: Coscheduling is what the gang plugin always does here", where)
        return True
    return plugin in KUBE_BUILTINS


def _score_name(plugin: str) -> str | None:
    if plugin == "NodeResourcesFit":
        return plugin
    return KUBE_SCORES.get(plugin)


def _kube_tiers(
    scores: Mapping[str, int], config: Mapping[str, Mapping[str, Any]], *, where: str
) -> list[dict[str, Any]]:
    fit = config.get("NodeResourcesFit", {})
    strategy = _mapping(fit.get("scoringStrategy") or {}, where=f"{where} NodeResourcesFit")
    resolved: dict[str, int] = {}
    for name, weight in scores.items():
        if name == "NodeResourcesFit":
            kind = strategy.get("type", "LeastAllocated")
            if kind not in FIT_STRATEGIES:
                raise InvalidObject(
                    f"{where}: NodeResourcesFit scoringStrategy.type {kind!r} is unknown "
                    f"(allowed: {', '.join(FIT_STRATEGIES)})"
                )
            name = FIT_STRATEGIES[kind]
        if name in resolved:
            raise InvalidObject(f"{where}: {name} is scored twice")
        resolved[name] = weight
    if "MostAllocated" in resolved and "RequestedToCapacityRatio" in resolved:
        raise InvalidObject(
            f"{where}: MostAllocated and RequestedToCapacityRatio are both enabled; "
            "batchsched's binpack scores one of them"
        )
    used = {"NodeResourcesFit"} if "NodeResourcesFit" in scores else set()
    entries: list[dict[str, Any]] = [{"name": "predicates"}, {"name": "proportion"}]
    for name, weight in resolved.items():
        if name in KUBE_UNSCORED:
            log.warning(
                "%s: score plugin %s has no effect here: %s", where, name, KUBE_UNSCORED[name]
            )
            continue
        arguments, source = _kube_arguments(name, config, strategy)
        if source:
            used.add(source)
        entries.append({"name": KUBE_PLUGINS[name], "arguments": {**arguments, "weight": weight}})
    for name in sorted(set(config) - used):
        log.warning(
            "%s.pluginConfig: %s has no effect here: its plugin is not enabled", where, name
        )
    return [{"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": entries}]


def _kube_arguments(
    name: str, config: Mapping[str, Mapping[str, Any]], strategy: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The batchsched arguments for score `name`, and which pluginConfig entry gave them."""
    if name == "RequestedToCapacityRatio":
        if "RequestedToCapacityRatio" in config:
            return _ratio(config["RequestedToCapacityRatio"]), "RequestedToCapacityRatio"
        ratio = dict(strategy.get("requestedToCapacityRatio") or {})
        if "resources" in strategy:
            ratio["resources"] = strategy["resources"]
        return _ratio(ratio), None
    if name in ("LeastAllocated", "MostAllocated"):
        own = f"NodeResources{name}"
        args = config.get(own)
        resources = args.get("resources") if args is not None else strategy.get("resources")
        out = {"resources": _weights(resources)} if resources is not None else {}
        extra = sorted(set(args or {}) - {"resources"})
        if extra:
            raise InvalidObject(f"pluginConfig {own}: unknown argument {extra[0]!r}")
        return out, own if args is not None else None
    if name == "BalancedAllocation":
        args = config.get("NodeResourcesBalancedAllocation")
        if args is None:
            return {}, None
        extra = sorted(set(args) - {"resources"})
        if extra:
            raise InvalidObject(
                f"pluginConfig NodeResourcesBalancedAllocation: unknown argument {extra[0]!r}"
            )
        return {"resources": _weights(args.get("resources", []))}, "NodeResourcesBalancedAllocation"
    if name == "PodTopologySpread":
        args = config.get("PodTopologySpread")
        if args is None:
            log.warning(
                "PodTopologySpread: kube-scheduler's system default constraints have no "
                "effect here: they find a pod's peers through Services and ReplicaSets, "
                "which batchsched does not watch"
            )
            return {}, None
        return dict(args), "PodTopologySpread"
    if config.get(name):
        key = sorted(config[name])[0]
        raise InvalidObject(f"pluginConfig {name}: argument {key!r} is not supported")
    return {}, name if name in config else None


def _ratio(args: Mapping[str, Any]) -> dict[str, Any]:
    """RequestedToCapacityRatio's arguments in binpack's words, whatever their spelling:
    `shape` (scores 0 to 10) or the legacy `functionShape` (0 to 100), and `resources` as
    a list of {name, weight} or the legacy `resourceToWeightMap`."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        lower = str(key).lower()
        if lower == "shape":
            out["shape"] = value
        elif lower == "functionshape":
            out["functionshape"] = value
        elif lower == "resourcetoweightmap":
            out["resourcetoweightmap"] = value
        elif lower == "resources":
            out["resources"] = _weights(value)
        else:
            raise InvalidObject(
                f"pluginConfig RequestedToCapacityRatio: unknown argument {key!r} (allowed: "
                "shape, resources, functionShape, resourceToWeightMap)"
            )
    return out


def _weights(raw: object) -> dict[str, Any]:
    """kube-scheduler's resources list, [{name, weight}] with weight 1 by default."""
    if not isinstance(raw, list):
        raise InvalidObject(f"resources: expected a list of {{name, weight}}, got {raw!r}")
    out: dict[str, Any] = {}
    for entry in raw:
        if not isinstance(entry, Mapping) or "name" not in entry or set(entry) - {"name", "weight"}:
            raise InvalidObject(f"resources: expected {{name, weight}}, got {entry!r}")
        out[str(entry["name"])] = entry.get("weight", 1)
    return out


def _plugin_config(raw: object, *, where: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(raw, list):
        raise InvalidObject(f"{where}: expected a list of {{name, args}}")
    config: dict[str, Mapping[str, Any]] = {}
    known = {"NodeResourcesFit", "NodeResourcesLeastAllocated", "NodeResourcesMostAllocated"}
    known |= {"RequestedToCapacityRatio", "NodeResourcesBalancedAllocation"}
    known |= {"PodTopologySpread", "NodeAffinity", "InterPodAffinity", COSCHEDULING}
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        entry = _mapping(entry, where=at)
        name = entry.get("name")
        if name == COSCHEDULING:
            _coscheduling(_mapping(entry.get("args") or {}, where=f"{at}.args"), where=at)
            continue
        if name not in known:
            raise InvalidObject(
                f"{at}.name: arguments of {name!r} are not supported (supported: "
                f"{', '.join(sorted(known))})"
            )
        args = _mapping(entry.get("args") or {}, where=f"{at}.args")
        # apiVersion/kind inside args (v1beta1 and later) only say what the args are.
        config[name] = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
    fit = config.get("NodeResourcesFit", {})
    extra = sorted(set(fit) - {"scoringStrategy"})
    if extra:
        raise InvalidObject(
            f"{where}: NodeResourcesFit argument {extra[0]!r} is not supported: batchsched "
            "checks every resource a pod requests"
        )
    return config


def _coscheduling(args: Mapping[str, Any], *, where: str) -> None:
    for key in args:
        if key in ("apiVersion", "kind"):
            continue
        if key not in COSCHEDULING_ARGUMENTS:
            raise InvalidObject(
                f"{where}.args.{key}: unknown Coscheduling argument "
                f"(known: {', '.join(sorted(COSCHEDULING_ARGUMENTS))})"
            )
        log.warning("%s.args.%s has no effect here: %s", where, key, COSCHEDULING_ARGUMENTS[key])


def _names(raw: object, *, where: str) -> list[tuple[str, int | None]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidObject(f"{where}: expected a list of {{name, weight}}")
    out: list[tuple[str, int | None]] = []
    for i, entry in enumerate(raw):
        entry = _mapping(entry, where=f"{where}[{i}]")
        name = entry.get("name")
        weight = entry.get("weight")
        if not isinstance(name, str) or (weight is not None and not isinstance(weight, int)):
            raise InvalidObject(f"{where}[{i}]: expected a name and a whole-number weight")
        out.append((name, weight))
    return out


def _mapping(raw: object, *, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected a map")
    return raw
