"""The DRA workload of bench/e2e.py (`--dra GPUS`): every node's GPUs published by a
driver as one ResourceSlice (pool named after the node, devices in index order), one
DeviceClass selecting them, and each gang's pods asking for 1 to GPUS of them through
a claim made from a ResourceClaimTemplate, one template per count (a gang's pods ask
alike; gang g asks (g mod GPUS) + 1, so every count comes up as often).

kube-controller-manager's resource-claim controller makes the pods' claims; a phase is
timed only once every pod's claim is made, so that both schedulers start with the
same objects and the controller's pace is not theirs. After a phase, deleting the pods
lets the controller release their claims (until then their devices are taken), which
the next phase waits for; then they are deleted.
"""

import asyncio

from batchsched.k8s.client import JSON, Api

from bench.cluster import CREATE_CONCURRENCY, bounded
from tests.support.objects import DRA_API, claim_template, device, device_class, exactly
from tests.support.objects import resource_slice as slice_of

DRIVER = "gpu.example.com"
CLASS = DRIVER
CLAIM = "gpus"
CONTROLLERS = ("resourceclaim-controller",)
POLL_SECONDS = 1.0


def template_name(count: int) -> str:
    return f"{CLAIM}-{count}"


async def create_devices(api: Api, nodes: list[str], gpus: int) -> None:
    """The DeviceClass, and a ResourceSlice of `gpus` GPUs per node."""
    selector = f'device.driver == "{DRIVER}"'
    await api.post(f"/apis/{DRA_API}/deviceclasses", device_class(CLASS, selector))

    async def publish(name: str) -> None:
        devices = [
            device(
                f"gpu-{g}",
                attributes={"index": {"int": g}, "model": {"string": "H100"}},
                capacity={"memory": "80Gi"},
            )
            for g in range(gpus)
        ]
        body = slice_of(
            f"{name}-{DRIVER}", driver=DRIVER, pool=name, devices=devices, node_name=name
        )
        await api.post(f"/apis/{DRA_API}/resourceslices", body)

    await bounded(CREATE_CONCURRENCY, publish, nodes)


async def create_templates(api: Api, namespace: str, gpus: int) -> None:
    for count in range(1, gpus + 1):
        body = claim_template(template_name(count), exactly("gpu", CLASS, count=count))
        await api.post(f"/apis/{DRA_API}/namespaces/{namespace}/resourceclaimtemplates", body)


def ask_devices(manifests: list[JSON], gang: int, gpus: int) -> None:
    """Each pod asks for its gang's count of GPUs through a claim from a template."""
    for index, manifest in enumerate(manifests):
        count = (index // gang) % gpus + 1
        manifest["spec"]["resourceClaims"] = [
            {"name": CLAIM, "resourceClaimTemplateName": template_name(count)}
        ]
        manifest["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": CLAIM}]


async def claims_made(api: Api, namespace: str, pods: int) -> None:
    """Until the controller has made every pod's claim (the pods' status names them)."""
    while True:
        listed = await api.get(f"/apis/{DRA_API}/namespaces/{namespace}/resourceclaims")
        if len(listed["items"]) >= pods:
            return
        await asyncio.sleep(POLL_SECONDS)


async def claims_released(api: Api, namespace: str) -> None:
    """Until the controller has released the claims of the namespace's deleted pods
    (their allocation cleared: the devices are free again), then delete them, as the
    garbage collector would (it does not run here)."""
    path = f"/apis/{DRA_API}/namespaces/{namespace}/resourceclaims"
    while any((c.get("status") or {}).get("allocation") for c in (await api.get(path))["items"]):
        await asyncio.sleep(POLL_SECONDS)
    await api.request("DELETE", path)
    while (await api.get(f"{path}?limit=1"))["items"]:
        await asyncio.sleep(POLL_SECONDS)


async def delete_templates(api: Api, namespace: str) -> None:
    path = f"/apis/{DRA_API}/namespaces/{namespace}/resourceclaimtemplates"
    names = [t["metadata"]["name"] for t in (await api.get(path))["items"]]
    await bounded(CREATE_CONCURRENCY, lambda name: api.request("DELETE", f"{path}/{name}"), names)
