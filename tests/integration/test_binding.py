"""Bindings as the binder sends them (protobuf, batchsched/k8s/protobuf.py), read by the
real API server: the pod lands on the node with its GPU cards recorded, and the uid in
the Binding is checked."""

from __future__ import annotations

import asyncio

import pytest

from batchsched.cache.cluster import ClusterCache
from batchsched.k8s.binder import Binder
from batchsched.k8s.client import Api, ApiError
from batchsched.k8s.credentials import load_credentials
from batchsched.k8s.fence import unbounded
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.watch import PODS, Watch
from batchsched.model.decisions import Binding

from tests.support import ControlPlane, Kube
from tests.support.objects import pod

pytestmark = pytest.mark.integration


async def test_the_binder_binds_a_pod_with_its_gpu_cards(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    created = kube.create(pod("p0", {"cpu": "1"}), namespace)
    api = Api(load_credentials(str(control_plane.kubeconfig)))
    idle = asyncio.Event()
    idle.set()
    status = StatusWriter(api, scheduler_name="batch-scheduler", instance="test", binds_idle=idle)
    watch = Watch(ClusterCache(), status)
    watch.apply(PODS, created)
    binder = Binder(api, watch, valid_for=unbounded, idle=idle)
    uid = created["metadata"]["uid"]
    binding = Binding(namespace, "p0", uid, "node-a", f"{namespace}/g", gpu_index=(0, 3))
    watch.cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
    task = asyncio.create_task(binder.run())
    try:
        binder.submit([binding])
        async with asyncio.timeout(30):
            await idle.wait()
    finally:
        task.cancel()
        await api.close()
    bound = kube.get(f"/api/v1/namespaces/{namespace}/pods/p0").expect(200)
    assert bound["spec"]["nodeName"] == "node-a"
    assert bound["metadata"]["annotations"]["scheduling.batchsched.io/gpu-index"] == "0,3"


async def test_a_binding_naming_another_uid_is_refused(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    kube.create(pod("p0", {"cpu": "1"}), namespace)
    api = Api(load_credentials(str(control_plane.kubeconfig)))
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p0", "namespace": namespace, "uid": "not-its-uid"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    }
    try:
        with pytest.raises(ApiError) as refused:
            await api.post(
                f"/api/v1/namespaces/{namespace}/pods/p0/binding", body, content_type=PROTOBUF
            )
    finally:
        await api.close()
    assert refused.value.status == 409
    pod_now = kube.get(f"/api/v1/namespaces/{namespace}/pods/p0").expect(200)
    assert not pod_now["spec"].get("nodeName")
