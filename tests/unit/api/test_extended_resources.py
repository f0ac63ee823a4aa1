"""Extended resources backed by a DeviceClass: which class backs a name, and the claim
kube-scheduler makes for a pod's containers, on the cases of its own tests
(k8s.io/kubernetes v1.36.3, pkg/scheduler/framework/plugins/dynamicresources/
extendeddynamicresources_test.go: Test_createRequestsAndMappings_requests and
_mappings), expectation from their assertions."""

from typing import Any

import pytest

from batchsched.api.dra import (
    DEVICE_CLASS_RESOURCE_PREFIX,
    class_from_object,
    container_extended,
    extended_claim,
    extended_resource_classes,
)

from tests.support.objects import device_class

GPU = "example.com/gpu"
IMPLICIT = f"{DEVICE_CLASS_RESOURCE_PREFIX}classInit"


class Pod:
    """Upstream's pod wrapper: Res adds container conN, InitReq init-conN, SidecarReq
    sidecar-conN (an init container with restartPolicy Always)."""

    def __init__(self) -> None:
        self.spec: dict[str, Any] = {"containers": [], "initContainers": []}

    def res(self, **requests: str) -> "Pod":
        return self._add("containers", f"con{len(self.spec['containers'])}", requests)

    def init(self, **requests: str) -> "Pod":
        return self._add("initContainers", f"init-con{len(self.spec['initContainers'])}", requests)

    def sidecar(self, **requests: str) -> "Pod":
        name = f"sidecar-con{len(self.spec['initContainers'])}"
        self._add("initContainers", name, requests)
        self.spec["initContainers"][-1]["restartPolicy"] = "Always"
        return self

    def _add(self, section: str, name: str, requests: dict[str, str]) -> "Pod":
        named = {_name(k): v for k, v in requests.items()}
        self.spec[section].append({"name": name, "resources": {"requests": named}})
        return self


def _name(key: str) -> str:
    """Keyword names: gpu, gpu1, gpuinit for example.com/gpu...; implicit for the
    implicit name of class classInit."""
    return IMPLICIT if key == "implicit" else GPU + key.removeprefix("gpu")


POD1 = Pod().res(gpu="1", gpu1="2")
POD2 = Pod().res(gpu="1").res(gpu1="2")
POD_INIT = Pod().res(gpu="1").init(gpuinit="2")
POD_INIT2 = Pod().res(gpu="1").init(gpuinit="1").init(gpuinit="2")
POD_INIT3 = Pod().res(gpu="1").init(gpuinit="1").sidecar(gpuinit="1").init(gpuinit="2")
POD1_INIT_IMPLICIT = Pod().init(gpuinit="1", implicit="2")
POD_INIT_IMPLICIT = Pod().res(gpu="1").init(gpuinit="1").init(implicit="2")

MAP = {GPU: "class"}
MAP2 = {GPU: "class", GPU + "1": "class1"}
MAP_INIT = {GPU: "class", GPU + "init": "classInit", IMPLICIT: "classInit"}


def _claim(pod: Pod, asked: list[str], mapping: dict[str, str]) -> Any:
    containers = container_extended(pod.spec, where="Pod p")
    needed = {name: mapping[name] for name in asked if name in mapping}
    return extended_claim(containers, needed)


@pytest.mark.parametrize(
    ("pod", "asked", "mapping", "expected"),
    [
        ("one resource match", [GPU], MAP, [("container-0-request-0", "class", 1)]),
        (
            "one resource match, one resource not match",
            [GPU, GPU + "1"],
            MAP,
            [("container-0-request-0", "class", 1)],
        ),
        (
            "two resources match",
            [GPU, GPU + "1"],
            MAP2,
            [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
        ),
        (
            "two containers match",
            [GPU, GPU + "1"],
            MAP2,
            [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
        ),
        (
            "one init container, one regular container",
            [GPU, GPU + "init"],
            MAP_INIT,
            [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
        ),
        (
            "two init containers, one regular container",
            [GPU, GPU + "init"],
            MAP_INIT,
            [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
        ),
        (
            "three init containers, one sidecar, one regular container",
            [GPU, GPU + "init"],
            MAP_INIT,
            [
                ("container-1-request-0", "classInit", 1),
                ("container-2-request-0", "classInit", 2),
                ("container-3-request-0", "class", 1),
            ],
        ),
    ],
)
def test_requests(pod: str, asked: list[str], mapping: dict[str, str], expected: Any) -> None:
    pods = {
        "one resource match": POD1,
        "one resource match, one resource not match": POD1,
        "two resources match": POD1,
        "two containers match": POD2,
        "one init container, one regular container": POD_INIT,
        "two init containers, one regular container": POD_INIT2,
        "three init containers, one sidecar, one regular container": POD_INIT3,
    }
    spec, _ = _claim(pods[pod], asked, mapping)
    found = [(r.name, r.alternatives[0].class_name, r.alternatives[0].count) for r in spec.requests]
    assert found == expected


@pytest.mark.parametrize(
    ("pod", "asked", "mapping", "expected"),
    [
        (
            POD1,
            [GPU, GPU + "1"],
            MAP2,
            [
                ("con0", GPU, "container-0-request-0"),
                ("con0", GPU + "1", "container-0-request-1"),
            ],
        ),
        (
            POD1_INIT_IMPLICIT,
            [GPU, GPU + "init", IMPLICIT],
            MAP_INIT,
            [
                ("init-con0", IMPLICIT, "container-0-request-0"),
                ("init-con0", GPU + "init", "container-0-request-1"),
            ],
        ),
        (
            POD2,
            [GPU, GPU + "1"],
            MAP2,
            [("con0", GPU, "container-0-request-0"), ("con1", GPU + "1", "container-1-request-0")],
        ),
        (
            POD_INIT,
            [GPU, GPU + "init"],
            MAP_INIT,
            [
                ("init-con0", GPU + "init", "container-0-request-0"),
                ("con0", GPU, "container-1-request-0"),
            ],
        ),
        (
            POD_INIT2,
            [GPU, GPU + "init"],
            MAP_INIT,
            [
                ("init-con0", GPU + "init", "container-1-request-0"),
                ("init-con1", GPU + "init", "container-1-request-0"),
                ("con0", GPU, "container-2-request-0"),
            ],
        ),
        (
            POD_INIT_IMPLICIT,
            [GPU, GPU + "init", IMPLICIT],
            MAP_INIT,
            [
                ("init-con0", GPU + "init", "container-0-request-0"),
                ("init-con1", IMPLICIT, "container-1-request-0"),
                ("con0", GPU, "container-2-request-0"),
            ],
        ),
        (
            POD_INIT3,
            [GPU, GPU + "init"],
            MAP_INIT,
            [
                ("init-con0", GPU + "init", "container-1-request-0"),
                ("sidecar-con1", GPU + "init", "container-1-request-0"),
                ("init-con2", GPU + "init", "container-2-request-0"),
                ("con0", GPU, "container-3-request-0"),
            ],
        ),
    ],
    ids=[
        "one container, two requests",
        "one container, one explicit and one implicit request",
        "two containers, two requests",
        "one init container, one regular container, one request",
        "three containers (two are init container), two requests",
        "three containers (two are init container), both explicit and implicit resources",
        "four containers (two are init container, one sidecar), three requests",
    ],
)
def test_mappings(pod: Pod, asked: list[str], mapping: dict[str, str], expected: Any) -> None:
    _, mappings = _claim(pod, asked, mapping)
    # Upstream's test sorts by request name, then container name.
    found = sorted(
        ((m.container, m.resource, m.request) for m in mappings), key=lambda m: (m[2], m[0])
    )
    assert found == expected


def _class(name: str, created: str, resource: str | None = None) -> Any:
    raw = device_class(name)
    raw["metadata"]["creationTimestamp"] = created
    if resource is not None:
        raw["spec"]["extendedResourceName"] = resource
    return class_from_object(raw)


def test_the_newest_class_naming_a_resource_backs_it_ties_to_the_first_name() -> None:
    classes = [
        _class("old", "2026-01-01T00:00:00Z", GPU),
        _class("new-b", "2026-02-01T00:00:00Z", GPU),
        _class("new-a", "2026-02-01T00:00:00Z", GPU),
        _class("plain", "2026-03-01T00:00:00Z"),
    ]
    found = extended_resource_classes(classes)
    assert found[GPU] == "new-a"
    assert found[f"{DEVICE_CLASS_RESOURCE_PREFIX}old"] == "old"
    assert found[f"{DEVICE_CLASS_RESOURCE_PREFIX}plain"] == "plain"
