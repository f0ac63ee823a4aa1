"""The objects scheduler-plugins' tests build (test/util, kube-scheduler's st wrappers),
in YAML form: nodes, pods and the scheduling.x-k8s.io PodGroup."""

from __future__ import annotations

from collections.abc import Mapping

from ..runner import JSON

API = "scheduling.x-k8s.io/v1alpha1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# test/integration/utils.go
LOW, MID, HIGH = 0, 100, 1000


def stamp(seconds: int) -> str:
    return f"2025-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


def node(name: str, allocatable: Mapping[str, str | int]) -> JSON:
    """st.MakeNode().Name(name), with the allocatable the test gives it (capacity alike)."""
    resources = {key: str(value) for key, value in allocatable.items()}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node": name}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod(
    name: str,
    namespace: str,
    requests: Mapping[str, str | int] | None = None,
    *,
    priority: int | None = None,
    group: str | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    gates: tuple[str, ...] = (),
    created: int = 0,
) -> JSON:
    """st.MakePod(): one container requesting `requests`, the PodGroup label if `group`,
    bound if `node_name`. Its scheduler is the default, which the test's profile serves."""
    spec: JSON = {
        "containers": [
            {
                "name": "con0",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {k: str(v) for k, v in (requests or {}).items()}},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if priority is not None:
        spec["priority"] = priority
    if node_name is not None:
        spec["nodeName"] = node_name
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    obj: JSON = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": stamp(created),
            "labels": {GROUP_LABEL: group} if group else {},
        },
        "spec": spec,
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def pod_group(
    name: str,
    namespace: str,
    min_member: int,
    *,
    min_resources: Mapping[str, str | int] | None = None,
    timeout: int | None = 10,
    created: int = 0,
) -> JSON:
    """util.MakePG (scheduleTimeoutSeconds 10) or tu.MakePodGroup (none)."""
    spec: JSON = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources:
        spec["minResources"] = {k: str(v) for k, v in min_resources.items()}
    return {
        "apiVersion": API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(created)},
        "spec": spec,
    }


def coscheduling_config(**args: int) -> JSON:
    """The profile test/integration/coscheduling_test.go gives its scheduler: Coscheduling
    sorting the queue, at preFilter, postFilter and permit, with `args`."""
    plugin = [{"name": "Coscheduling"}]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "queueSort": {"enabled": plugin, "disabled": [{"name": "*"}]},
                    "preFilter": {"enabled": plugin},
                    "postFilter": {"enabled": plugin},
                    "permit": {"enabled": plugin},
                },
                "pluginConfig": [{"name": "Coscheduling", "args": args}],
            }
        ],
    }
