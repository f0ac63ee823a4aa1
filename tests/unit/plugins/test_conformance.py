"""conformance: accepted for Volcano's configuration; the framework already spares what it
spares, so it registers nothing."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config

from tests.support.objects import decide, node, pod, pod_group

CONFIG = (
    'actions: "enqueue, allocate, preempt"\n'
    "tiers:\n- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
    "- plugins: [{name: predicates}]\n"
)


@pytest.mark.parametrize("config", [CONFIG, CONFIG.replace(", {name: conformance}", "")])
def test_critical_and_system_pods_are_never_preempted_with_or_without_it(config: str) -> None:
    decisions = decide(
        [
            node("n1", cpu="2"),
            pod(
                "dns",
                requests={"cpu": "1"},
                namespace="kube-system",
                node_name="n1",
                phase="Running",
            ),
            pod(
                "agent",
                requests={"cpu": "1"},
                node_name="n1",
                phase="Running",
                spec={"priorityClassName": "system-node-critical"},
            ),
            pod_group("high", 1),
            pod("high-0", requests={"cpu": "1"}, group="high", spec={"priority": 1000}),
        ],
        config,
    )
    assert decisions.evictions == []


def test_takes_no_arguments() -> None:
    with pytest.raises(InvalidObject, match="plugin conformance: unknown argument 'x'"):
        load_config(CONFIG.replace("{name: conformance}", "{name: conformance, arguments: {x: 1}}"))
