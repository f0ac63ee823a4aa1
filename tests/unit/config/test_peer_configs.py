"""Peers' configuration files: Volcano's (alone or in its chart's ConfigMap) and
kube-scheduler's KubeSchedulerConfiguration, each key honoured, logged or refused."""

import logging
from pathlib import Path

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import SchedulerConfig, load_config
from batchsched.framework.session import Session

from tests.support.objects import node, pod, snapshot_of

CONFIGS = Path(__file__).resolve().parents[3] / "examples" / "config"

# The chart's file in Volcano's releases, and as its main branch has it now.
VOLCANO = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
VOLCANO_MAIN = """actions: "enqueue, reserve, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: reservation
"""
# Volcano's first CI configuration: actions as {name, arguments}.
VOLCANO_OLD_CI = """actions:
- name: enqueue
- name: allocate
- name: backfill
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
"""


def names(config: SchedulerConfig) -> list[list[str]]:
    return [[plugin.name for plugin in tier] for tier in config.tiers]


def session_of(config: SchedulerConfig) -> Session:
    return Session(snapshot_of([node("n1"), pod("p")]), tiers=config.tiers)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_volcano_chart_configmap_runs_unchanged() -> None:
    config = load_config((CONFIGS / "volcano-scheduler.yaml").read_text(), source="cm")
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert names(config) == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    assert names(config) == names(load_config(VOLCANO))
    session = session_of(config)
    # enablePreemptable: false on gang and drf: only priority votes.
    assert len(session.preemptable) == 1
    assert len(session.enqueue_headroom) == 1
    # priority's job order, then drf's share.
    assert len(session.job_keys) == 2


def test_preemptable_flag_is_honoured() -> None:
    on = VOLCANO.replace("  - name: drf\n    enablePreemptable: false\n", "  - name: drf\n")
    assert len(session_of(load_config(on)).preemptable) == 2


def test_volcano_main_branch_logs_reservation(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_config(VOLCANO_MAIN, source="conf")
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert "reservation" not in names(config)[1]
    assert messages(caplog) == [
        "conf.actions: 'reserve' has no effect here: batchsched does not read Volcano's "
        "Reservation objects",
        "conf.tiers[1].plugins[6]: plugin 'reservation' has no effect here: batchsched does "
        "not read Volcano's Reservation objects",
        "plugin nodeorder: imagelocality.weight has no effect here: batchsched does not read "
        "the images nodes hold",
    ]


def test_volcano_first_ci_configuration() -> None:
    config = load_config(VOLCANO_OLD_CI)
    assert config.actions == ("enqueue", "allocate", "backfill")
    with pytest.raises(InvalidObject, match=r"actions\[0\]\.arguments\.enqueue-action-idleres-mul"):
        load_config(
            VOLCANO_OLD_CI.replace(
                "- name: enqueue\n",
                "- name: enqueue\n  arguments: {enqueue-action-idleres-mul: 1.2}\n",
            )
        )


@pytest.mark.parametrize(
    ("entry", "lists"),
    [
        ("{name: priority, enableJobOrder: false}", {"job_keys": 0, "task_keys": 1}),
        ("{name: priority, enabledTaskOrder: false}", {"job_keys": 1, "task_keys": 0}),
        ("{name: priority, enableJobOrder: true}", {"job_keys": 1, "task_keys": 1}),
        (
            "{name: proportion, enableQueueOrder: false, enableReclaimable: false}",
            {"queue_keys": 0, "reclaimable": 0},
        ),
        (
            "{name: gang, enableJobReady: false}",
            {"ready_checks": 0, "minimum_checks": 0, "shortfalls": 0},
        ),
        ("{name: gang}", {"ready_checks": 1, "minimum_checks": 1, "shortfalls": 1}),
        ("{name: proportion}", {"overused_checks": 1, "share_checks": 1}),
        ("{name: proportion, enabledOverused: false}", {"overused_checks": 0, "share_checks": 1}),
        (
            "{name: proportion, enabledAllocatable: false}",
            {"overused_checks": 1, "share_checks": 0, "capacity_checks": 1},
        ),
        ("{name: proportion, enabledOverused: true}", {"overused_checks": 1}),
    ],
)
def test_enable_flags_take_callbacks_out(entry: str, lists: dict[str, int]) -> None:
    config = load_config(f"tiers:\n- plugins: [{{name: predicates}}, {entry}]\n")
    session = session_of(config)
    assert {name: len(getattr(session, name)) for name in lists} == lists


def test_flags_without_a_counterpart_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        load_config(
            "tiers:\n- plugins: [{name: predicates}, {name: gang, enableJobStarving: false}]\n",
            source="c",
        )
    assert messages(caplog) == [
        "c.tiers[0].plugins[1].enableJobStarving: false has no effect here: room for starving "
        "gangs is set by starvationThreshold"
    ]


def test_every_flag_of_volcanos_plugin_options_is_read(caplog: pytest.LogCaptureFixture) -> None:
    """Each `enable*` key of Volcano v1.15.1's PluginOption (pkg/scheduler/conf), false."""
    flags = [
        "enableJobOrder",
        "enableHierarchy",
        "enableJobReady",
        "enableJobPipelined",
        "enableTaskOrder",
        "enablePreemptable",
        "enableReclaimable",
        "enablePreemptive",
        "enableQueueOrder",
        "EnabledClusterOrder",
        "enablePredicate",
        "enableBestNode",
        "enableNodeOrder",
        "enableTargetJob",
        "enableReservedNodes",
        "enableJobEnqueued",
        "enabledVictim",
        "enableJobStarving",
        "enabledOverused",
        "enabledAllocatable",
        "enabledHyperNodeOrder",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    ]
    # Hierarchy and Predicate are refused when false (tested above); the rest load.
    entry = ", ".join(
        f"{flag}: false" for flag in flags if flag not in ("enableHierarchy", "enablePredicate")
    )
    with caplog.at_level(logging.WARNING):
        load_config(f"tiers:\n- plugins: [{{name: predicates}}, {{name: gang, {entry}}}]\n")
    logged = {message.split(":")[0].rsplit(".", 1)[1] for message in messages(caplog)}
    assert logged == {
        "enableJobPipelined",
        "enablePreemptive",
        "EnabledClusterOrder",
        "enableBestNode",
        "enableTargetJob",
        "enableReservedNodes",
        "enabledVictim",
        "enableJobStarving",
        "enabledHyperNodeOrder",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    }


def test_volcanos_metrics_source_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_config(
            VOLCANO + "metrics: {type: prometheus, address: 'http://p:9090', interval: 30s}\n",
            source="c",
        )
    assert names(config)[0] == ["priority", "gang", "conformance"]
    assert (
        "c.metrics has no effect here: it is where Volcano's usage plugin reads nodes' load; "
        "batchsched places by requests"
    ) in messages(caplog)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{name: drf, enableHierarchy: true}",
            r"plugins\[1\]\.enableHierarchy: hierarchical sharing is not supported",
        ),
        (
            "{name: gang, enableJobOrder: 'no'}",
            r"plugins\[1\]\.enableJobOrder: expected true or false, got 'no'",
        ),
        (
            "{name: gang, enableMagic: false}",
            r"plugins\[1\]\.enableMagic: unknown flag \(allowed: enableAllocatable",
        ),
        (
            "{name: predicates, enablePredicate: false}",
            r"plugins\[1\]\.enablePredicate: the predicates plugin's checks",
        ),
        ("{name: tdm}", r"unknown plugin 'tdm'"),
        ("{name: sla, arguments: {sla-waiting-time: soon}}", r"sla-waiting-time: 'soon' is not"),
        ("{name: capacity, arguments: {ancestorReclaimLevel: -1}}", r"must be >= 0, got -1"),
        ("{name: proportion, arguments: {ancestorReclaimLevel: 1}}", r"unknown argument"),
        ("{name: gang, weight: 1}", r"unknown key 'weight'"),
    ],
)
def test_what_cannot_be_honoured_is_refused(entry: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        load_config(f"tiers:\n- plugins: [{{name: predicates}}, {entry}]\n")


def test_volcano_binpack_arguments() -> None:
    config = load_config(
        "tiers:\n- plugins:\n  - {name: predicates}\n  - name: binpack\n    arguments:\n"
        "      binpack.weight: 10\n      binpack.cpu: 5\n      binpack.memory: 0\n"
        "      binpack.resources: nvidia.com/gpu, example.com/foo\n"
        "      binpack.resources.nvidia.com/gpu: 2\n"
    )
    [[_, binpack]] = config.tiers
    assert binpack.weight == 10  # type: ignore[attr-defined]
    assert binpack.weights == {"cpu": 5, "nvidia.com/gpu": 2, "example.com/foo": 1}  # type: ignore[attr-defined]


def test_volcano_binpack_resource_weights_volcano_never_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Volcano weighs CPU by binpack.cpu even when binpack.resources lists it, and never
    looks up the weight of a resource not listed: both are logged as having no effect."""
    with caplog.at_level(logging.WARNING):
        config = load_config(
            "tiers:\n- plugins:\n  - {name: predicates}\n  - name: binpack\n    arguments:\n"
            "      binpack.cpu: 5\n      binpack.resources: cpu\n"
            "      binpack.resources.cpu: 2\n      binpack.resources.example.com/bar: 2\n"
        )
    [[_, binpack]] = config.tiers
    assert binpack.weights == {"cpu": 5, "memory": 1}  # type: ignore[attr-defined]
    assert [r.getMessage() for r in caplog.records] == [
        f"config.tiers[0].plugins[1].arguments.binpack.resources.{name} has no effect, here "
        "as in Volcano: a resource weighs by it only when binpack.resources lists it (CPU and "
        "memory weigh by binpack.cpu and binpack.memory)"
        for name in ("cpu", "example.com/bar")
    ]
    with pytest.raises(InvalidObject, match=r"arguments\.binpack\.gpu: unknown argument"):
        load_config(
            "tiers:\n- plugins:\n  - {name: predicates}\n  - name: binpack\n    arguments:\n"
            "      binpack.gpu: 2\n"
        )


def test_configurations(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        VOLCANO
        + "configurations:\n- name: allocate\n  arguments: {predicateErrorCacheEnable: true}\n"
    )
    with caplog.at_level(logging.WARNING):
        load_config(text, source="c")
    assert any("predicateErrorCacheEnable has no effect here" in m for m in messages(caplog))
    with pytest.raises(
        InvalidObject, match=r"c\.configurations\[0\]\.arguments\.preemptRate: not supported"
    ):
        load_config(
            VOLCANO + "configurations:\n- {name: preempt, arguments: {preemptRate: 2}}\n",
            source="c",
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: ConfigMap\ndata: {}\n",
            r"cm\.data: a ConfigMap holding the configuration is needed",
        ),
        ("kind: ConfigMap\ndata: {a: 'x: 1', b: 'y: 2'}\n", r"which key holds the configuration\?"),
        ("kind: ConfigMap\ndata: {a: 'x: [1'}\n", r"cm\.data\.a: not valid YAML"),
        (
            'kind: ConfigMap\ndata: {a: "schedulePeriod: 2s\\nbad: 1"}\n',
            r"cm\.data\.a: unknown key 'bad'",
        ),
    ],
)
def test_configmap_problems(text: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        load_config(text, source="cm")


def test_a_configmap_with_one_key_of_our_own() -> None:
    config = load_config("kind: ConfigMap\ndata:\n  config.yaml: |\n    schedulePeriod: 2s\n")
    assert config.schedule_period == 2.0


# kube-scheduler.

SEED = (CONFIGS / "kube-scheduler-binpack.yaml").read_text()


def scorer_weights(config: SchedulerConfig) -> dict[str, int]:
    return {type(s).__name__: w for s, w in session_of(config).scorers}


def test_seed_kube_scheduler_configuration(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_config(SEED, source="seed")
    assert config.scheduler_names == ("default-scheduler",)
    assert names(config)[1] == [
        "predicates",
        "proportion",
        "balancedallocation",
        "interpodaffinity",
        "nodeaffinity",
        "podtopologyspread",
        "tainttoleration",
        "binpack",
    ]
    binpack = config.tiers[1][-1]
    assert binpack.weight == 100  # type: ignore[attr-defined]
    assert binpack.weights == {"cpu": 1, "nvidia.com/gpu": 1}  # type: ignore[attr-defined]
    assert messages(caplog) == [
        "seed.leaderElection has no effect here: leader election is set by `batchsched run "
        "--leader-elect` and its --lease flags",
        "seed.clientConnection has no effect here: the API server is reached through "
        "--kubeconfig (default: in-cluster)",
        "seed: score plugin ImageLocality has no effect here: batchsched does not read the "
        "images nodes hold",
        "PodTopologySpread: kube-scheduler's system default constraints have no effect here: "
        "they find a pod's peers through Services and ReplicaSets, which batchsched does not "
        "watch",
    ]


CURRENT = """apiVersion: kubescheduler.config.k8s.io/{version}
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
profiles:
- schedulerName: batch-binpack
  plugins:
    score:
      disabled: [{{name: "*"}}]
      enabled: [{{name: NodeResourcesFit, weight: 5}}, {{name: TaintToleration}}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{{name: cpu, weight: 1}}, {{name: nvidia.com/gpu, weight: 3}}]
        requestedToCapacityRatio:
          shape: [{{utilization: 0, score: 0}}, {{utilization: 100, score: 10}}]
"""


@pytest.mark.parametrize("version", ["v1beta2", "v1beta3", "v1"])
def test_current_spelling_with_scoring_strategy(version: str) -> None:
    config = load_config(CURRENT.format(version=version))
    assert config.scheduler_names == ("batch-binpack",)
    assert names(config)[1] == ["predicates", "proportion", "binpack", "tainttoleration"]
    binpack = config.tiers[1][2]
    assert (binpack.weight, binpack.weights) == (5, {"cpu": 1, "nvidia.com/gpu": 3})  # type: ignore[attr-defined]


def test_v1beta1_requested_to_capacity_ratio_plugin() -> None:
    config = load_config(
        """apiVersion: kubescheduler.config.k8s.io/v1beta1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    score:
      enabled: [{name: RequestedToCapacityRatio, weight: 3}]
      disabled: [{name: NodeResourcesLeastAllocated}, {name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: RequestedToCapacityRatio
    args:
      shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
      resources: [{name: nvidia.com/gpu, weight: 2}, {name: cpu}]
- schedulerName: second
  plugins:
    score:
      enabled: [{name: RequestedToCapacityRatio, weight: 3}]
      disabled: [{name: NodeResourcesLeastAllocated}, {name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: RequestedToCapacityRatio
    args:
      shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
      resources: [{name: nvidia.com/gpu, weight: 2}, {name: cpu}]
"""
    )
    assert config.scheduler_names == ("default-scheduler", "second")
    binpack = config.tiers[1][-1]
    assert binpack.weights == {"nvidia.com/gpu": 2, "cpu": 1}  # type: ignore[attr-defined]
    assert "leastallocated" not in names(config)[1]
    assert "balancedallocation" not in names(config)[1]


def test_default_profile_spreads_as_kube_scheduler() -> None:
    config = load_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    )
    assert scorer_weights(config) == {"LeastAllocated": 1, "BalancedAllocation": 1}
    assert config.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")


def test_preemption_turned_off() -> None:
    for text in (
        "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n"
        "disablePreemption: true\n",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{plugins: {postFilter: {disabled: [{name: DefaultPreemption}]}}}]\n",
    ):
        assert "preempt" not in load_config(text).actions


KSC = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: kubescheduler.config.k8s.io/v2\nkind: KubeSchedulerConfiguration\n",
            r"c\.apiVersion: unknown",
        ),
        (KSC + "extenders: []\n", r"c\.extenders: not supported"),
        (KSC + "algorithmSource: {}\n", r"c\.algorithmSource: not supported"),
        (
            KSC + "profiles: [{plugins: {filter: {disabled: [{name: NodeResourcesFit}]}}}]\n",
            r"'NodeResourcesFit' cannot be turned off",
        ),
        (
            KSC + "profiles: [{plugins: {score: {enabled: [{name: MyScore}]}}}]\n",
            r"'MyScore' is not a score plugin batchsched knows",
        ),
        (
            KSC + "profiles: [{plugins: {filter: {enabled: [{name: MyFilter}]}}}]\n",
            r"'MyFilter' is not supported",
        ),
        (
            KSC + "profiles: [{pluginConfig: [{name: NodeResourcesFit, "
            "args: {ignoredResources: [x]}}]}]\n",
            r"NodeResourcesFit argument 'ignoredResources' is not supported",
        ),
        (
            KSC + "profiles: [{pluginConfig: [{name: CapacityScheduling, args: {}}]}]\n",
            r"arguments of 'CapacityScheduling' are not supported",
        ),
        (
            KSC + "profiles: [{pluginConfig: [{name: Coscheduling, args: {permitWait: 1}}]}]\n",
            r"args.permitWait: unknown Coscheduling argument",
        ),
        (
            KSC + "profiles: [{plugins: {multiPoint: {enabled: [{name: CapacityScheduling}]}}}]\n",
            r"'CapacityScheduling' is not a score plugin batchsched knows",
        ),
        (
            KSC + "profiles: [{schedulerName: a}, "
            "{schedulerName: b, plugins: {score: {disabled: [{name: '*'}]}}}]\n",
            r"profiles\[1\]: profiles that place pods differently",
        ),
        (
            KSC + "profiles: [{pluginConfig: [{name: PodTopologySpread, "
            "args: {defaultingType: System}}]}]\n",
            r"System",
        ),
    ],
)
def test_kube_keys_that_cannot_be_honoured_are_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        load_config(text, source="c")


def test_scheduler_plugins_coscheduling_profile_loads(caplog: pytest.LogCaptureFixture) -> None:
    """scheduler-plugins' own profile: Coscheduling everywhere it hooks in, PrioritySort
    replaced at queueSort, and its Permit wait: the gang plugin does all of it."""
    config = load_config(
        KSC
        + """profiles:
- schedulerName: scheduler-plugins-scheduler
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
    preFilter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
    reserve: {enabled: [{name: Coscheduling}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 5, podGroupRejectPercentage: 10}
"""
    )
    assert config.scheduler_names == ("scheduler-plugins-scheduler",)
    assert "gang" in {plugin.name for tier in config.tiers for plugin in tier}
    assert "permitWaitingTimeSeconds has no effect here" in caplog.text
    assert "podGroupRejectPercentage has no effect here" in caplog.text


def test_volcano_keys_without_effect_here_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Keys Volcano's own tests and chart set, which change no placement here."""
    text = (
        'actions: "allocate, preempt"\n'
        "tiers:\n- plugins:\n  - {name: priority}\n  - {name: gang}\n  - {name: sla}\n"
        "- plugins:\n"
        "  - {name: predicates, arguments: {predicate.DynamicResourceAllocationEnable: true}}\n"
        "  - {name: capacity, enableHierarchy: true}\n"
        "  - {name: network-topology-aware, arguments: {weight: 10}}\n"
        "configurations:\n- name: preempt\n  arguments: {enableTopologyAwarePreemption: true}\n"
    )
    with caplog.at_level(logging.WARNING):
        config = load_config(text, source="c")
    assert names(config) == [
        ["priority", "gang", "sla"],
        ["predicates", "capacity", "network-topology-aware"],
    ]
    logged = messages(caplog)
    assert (
        "c.configurations[0].arguments.enableTopologyAwarePreemption has no effect here: "
        "batchsched's preempt takes the cheapest victim set over every node, keeping pods' "
        "affinity and spread, with either search"
    ) in logged
    assert (
        "c.tiers[1].plugins[0].arguments.predicate.DynamicResourceAllocationEnable has no "
        "effect here: pods' resource claims are allocated as kube-scheduler allocates them, "
        "whatever the flag"
    ) in logged


def test_other_action_arguments_are_still_refused() -> None:
    with pytest.raises(InvalidObject, match=r"arguments\.enableMagic: not supported"):
        load_config(
            "tiers:\n- plugins: [{name: predicates}]\n"
            "configurations:\n- name: preempt\n  arguments: {enableMagic: true}\n"
        )


def test_reclaim_may_rest_on_capacity() -> None:
    config = load_config(
        'actions: "reclaim"\ntiers:\n- plugins: [{name: predicates}, {name: capacity}]\n'
    )
    assert config.actions == ("reclaim",)


def test_capacity_device_switches_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        "tiers:\n- plugins:\n  - {name: predicates}\n  - name: capacity\n    arguments:\n"
        "      capacity.DynamicResourceAllocationEnable: true\n"
        "      capacity.DRAConsumableCapacityEnable: true\n      ancestorReclaimLevel: 2\n"
    )
    with caplog.at_level(logging.WARNING):
        config = load_config(text, source="c")
    assert names(config) == [["predicates", "capacity"]]
    assert (
        len([m for m in messages(caplog) if "held to queues' deviceclass/ capability keys" in m])
        == 2
    )
