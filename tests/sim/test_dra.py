"""Resource claims through `batchsched simulate`: claims from templates made as the
resource-claim controller makes them, allocations written to the claims and released
with their pods, and `explain` naming what no node meets."""

from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from batchsched.config.load import default_config
from batchsched.explain.analysis import explain
from batchsched.explain.session import run_once
from batchsched.explain.target import Target

from .harness import EXAMPLES, simulate_text
from tests.support.objects import at, cache_of

NODE_AND_GPUS = """---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]}}}
"""


def _pod(name: str, created: str, template: str = "two-gpus", duration: str = "") -> str:
    notes = (
        f"\n  annotations: {{simulation.batchsched.io/duration: {duration}}}" if duration else ""
    )
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  creationTimestamp: "2026-01-01T00:{created}:00Z"{notes}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: main}}]
  resourceClaims: [{{name: gpus, resourceClaimTemplateName: {template}}}]
"""


def test_devices_come_back_when_the_pod_that_held_them_finishes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = NODE_AND_GPUS + _pod("first", "00", duration="60s") + _pod("second", "01")
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {"default/first": "n1", "default/second": "n1"}
    first, second = run.pods["default/first"], run.pods["default/second"]
    assert (first["bound_at"], first["finished_at"], second["bound_at"]) == (0.0, 60.0, 60.0)


def test_a_template_that_does_not_exist_is_named_and_the_pod_waits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = NODE_AND_GPUS + _pod("lost", "00", template="nope") + _pod("found", "01")
    path = tmp_path / "input.yaml"
    path.write_text(text)
    code = main(["simulate", "-f", str(path), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 0
    assert (
        "Pod default/lost: spec.resourceClaims[0].resourceClaimTemplateName: "
        "ResourceClaimTemplate default/nope not found; the pod waits for its claim"
    ) in captured.err
    assert '"node": "n1"' in captured.out


def test_explain_names_the_selector_no_device_meets(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "-f", str(EXAMPLES / "dra-gpus.yaml"), "pod/blackwell"])
    out = capsys.readouterr().out
    assert code == 0
    assert "request gpu: selector #0 (device.attributes['gpu.nvidia.com']" in out
    assert "cudaComputeCapability.compareTo(semver('10.0.0')) >= 0)" in out


def test_explain_names_the_constraint_no_node_meets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (
        NODE_AND_GPUS.replace(
            "devices: [{name: gpu-0}, {name: gpu-1}]",
            "devices: [{name: gpu-0, attributes: {numa: {int: 0}}}, "
            "{name: gpu-1, attributes: {numa: {int: 1}}}]",
        )
        + """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: same-numa}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]
    constraints: [{matchAttribute: gpu.example.com/numa}]
---
apiVersion: v1
kind: Pod
metadata: {name: numa}
spec:
  schedulerName: batch-scheduler
  containers: [{name: main}]
  resourceClaims: [{name: gpus, resourceClaimName: same-numa}]
"""
    )
    path = tmp_path / "input.yaml"
    path.write_text(text)
    assert main(["explain", "-f", str(path), "pod/numa"]) == 0
    out = capsys.readouterr().out
    assert (
        "cause: claim default/same-numa: constraint #0 (matchAttribute gpu.example.com/numa) "
        "cannot hold with the devices free on any node (closest: node n1)"
    ) in out


def _taint_rule(name: str, selector: str, effect: str = "NoSchedule") -> str:
    return f"""---
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {{name: {name}}}
spec:
  deviceSelector: {selector}
  taint: {{key: maintenance, value: planned, effect: {effect}}}
"""


def test_a_device_taint_rule_keeps_its_devices_from_claims_that_do_not_tolerate_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A rule tainting gpu-1 leaves one GPU where the pod asks two; a rule on another
    driver or of effect None changes nothing; a claim tolerating the taint gets both."""
    tolerating = """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: tolerant}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu
          count: 2
          tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
"""
    text = (
        NODE_AND_GPUS
        + tolerating
        + _taint_rule("gpu-1-down", "{driver: gpu.example.com, pool: n1, device: gpu-1}")
        + _taint_rule("elsewhere", "{driver: other.example.com}")
        + _taint_rule("note", "{}", effect="None")
        + _pod("blocked", "00")
        + _pod("tolerant", "01", template="tolerant")
    )
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {"default/tolerant": "n1"}
    assert run.pods["default/blocked"]["reason"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
    )


def test_a_device_taint_rule_of_a_version_not_served_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rule = _taint_rule("old", "{deviceClassName: gpu}").replace("v1beta2", "v1alpha3")
    path = tmp_path / "input.yaml"
    path.write_text(NODE_AND_GPUS + rule + _pod("first", "00"))
    code = main(["simulate", "-f", str(path), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 0
    assert (
        "DeviceTaintRule old: apiVersion 'resource.k8s.io/v1alpha3' is not served by "
        "Kubernetes 1.36 for DeviceTaintRules; use resource.k8s.io/v1beta2"
    ) in captured.err
    assert '"node": "n1"' in captured.out


def _extended_pod(name: str, created: str, count: int, duration: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  creationTimestamp: "2026-01-01T00:{created}:00Z"
  annotations: {{simulation.batchsched.io/duration: {duration}}}
spec:
  schedulerName: batch-scheduler
  containers:
  - name: main
    resources: {{limits: {{example.com/gpu: {count}}}}}
"""


def test_an_extended_resource_backed_by_a_class_takes_devices_until_its_pod_finishes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The node has no example.com/gpu but two GPUs of a class backing it: the first
    pod takes both through its claim; the second binds when the first finishes."""
    text = (
        NODE_AND_GPUS.replace(
            "kind: DeviceClass\nmetadata: {name: gpu}\nspec: {",
            "kind: DeviceClass\nmetadata: {name: gpu}\nspec: {extendedResourceName: "
            "example.com/gpu, ",
        )
        + _extended_pod("first", "00", 2, "60s")
        + _extended_pod("second", "01", 1, "60s")
    )
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {"default/first": "n1", "default/second": "n1"}
    first, second = run.pods["default/first"], run.pods["default/second"]
    assert (first["bound_at"], first["finished_at"], second["bound_at"]) == (0.0, 60.0, 60.0)


def test_a_claim_left_from_an_earlier_attempt_is_deleted_and_the_pod_gets_a_new_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The input holds a claim made for the pending pod's extended resources at an
    earlier attempt (annotated so, the pod its controller), holding both GPUs: it is
    deleted, as kube-scheduler's PostFilter deletes it, and the pod binds with a new one."""
    left = """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: first-extended-resources-old12
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: first, uid: uid-first, controller: true}]
spec:
  devices:
    requests:
    - {name: container-0-request-0, exactly: {deviceClassName: gpu, count: 2}}
status:
  allocation:
    devices:
      results:
      - {request: container-0-request-0, driver: gpu.example.com, pool: n1, device: gpu-0}
      - {request: container-0-request-0, driver: gpu.example.com, pool: n1, device: gpu-1}
  reservedFor: [{resource: pods, name: first, uid: uid-first}]
"""
    text = (
        NODE_AND_GPUS.replace(
            "kind: DeviceClass\nmetadata: {name: gpu}\nspec: {",
            "kind: DeviceClass\nmetadata: {name: gpu}\nspec: {extendedResourceName: "
            "example.com/gpu, ",
        )
        + _extended_pod("first", "00", 2, "60s").replace(
            "  name: first\n", "  name: first\n  uid: uid-first\n"
        )
        + left
    )
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {"default/first": "n1"}


PINNED_TO_FULL_NODE = (
    NODE_AND_GPUS.replace("name: n1", "name: n2")
    .replace(": n1", ": n2")
    .replace('cpu: "8"', 'cpu: "1"')
    .split("---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass")[0]
    + NODE_AND_GPUS
    + """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 1}}]}}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n2, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n2]}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  schedulerName: batch-scheduler
  containers: [{name: main, resources: {requests: {cpu: "2"}}}]
  resourceClaims: [{name: gpu, resourceClaimName: held}]
"""
)


def test_a_claim_allocated_for_a_full_node_is_deallocated_and_its_pod_binds_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The claim holds n2's GPU, where the pod's cpu does not fit, and is reserved for
    nobody: it is deallocated, as kube-scheduler's PostFilter does, and the pod binds
    on n1 with n1's GPU."""
    run = simulate_text(capsys, tmp_path, PINNED_TO_FULL_NODE)
    assert run.bound() == {"default/p": "n1"}


def test_explain_on_a_cluster_says_a_claim_pinned_to_a_full_node_is_deallocated() -> None:
    """As `batchsched explain` runs one session over a live cluster (a simulation has
    applied the deallocation by its end)."""
    cache = cache_of(yaml.safe_load_all(PINNED_TO_FULL_NODE))
    ran = run_once(cache, default_config(), now=at(0))
    found = explain(ran, Target(kind="pod", namespace="default", name="p"))
    assert found.cause == (
        "claim(s) default/held hold devices on nodes where the pod no longer fits, "
        "so no node takes it; deallocated now, as kube-scheduler's PostFilter does"
    )
    assert found.remedy == (
        "nothing to do: the next attempt allocates the claim again where the pod fits"
    )
