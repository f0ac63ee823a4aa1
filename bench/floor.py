"""The list-watch floor: the least work any scheduler that watches the cluster does.

Usage: python -m bench.floor --kubeconfig FILE --namespace NS [--concurrency 64]
Started by bench/e2e.py as it starts the operator, and timed the same way.

It does what no scheduler can skip, and nothing else: start Python, list every node
and every pod (with the informers' own page reader, batchsched/k8s/pages.py), watch
every pod from the list's version on, decoding each event, and bind each of the
namespace's pods that has no node to the nodes in turn, `--concurrency` at a time,
with the operator's client and protobuf Binding bodies. It decides nothing, keeps no
cache and writes no status. The end-to-end phase's ratio to this phase is what the
scheduler itself costs; this phase's ratio to the raw ceiling is what listing and
watching cost on the machine the bench runs on, which no scheduler can win back.

It runs until SIGTERM.
"""

import argparse
import asyncio
import contextlib
import json
import signal
from urllib.parse import urlencode

from batchsched.k8s.client import JSON, Api
from batchsched.k8s.credentials import load_credentials
from batchsched.k8s.pages import read_pages
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.k8s.trim import without_managed_fields

# The watch outlives any phase; the bench stops this process long before.
WATCH_SILENCE_SECONDS = 600.0


async def list_all(api: Api, path: str) -> tuple[list[JSON], str]:
    """Every object at `path`, and the list's resourceVersion, read as informers read."""
    items: list[JSON] = []
    version = ""
    async with contextlib.aclosing(read_pages(api, path)) as pages:
        async for page in pages:
            items.extend(page["items"])
            version = str(page["metadata"]["resourceVersion"])
    return items, version


async def watch_pods(api: Api, version: str) -> None:
    """Every pod event from `version` on, decoded and dropped."""
    query = urlencode({"watch": "true", "resourceVersion": version})
    async with api.stream(f"/api/v1/pods?{query}", silence=WATCH_SILENCE_SECONDS) as reply:
        async for line in reply.lines():
            if line.strip():
                json.loads(without_managed_fields(line))


async def bind(
    api: Api, nodes: list[JSON], pods: list[JSON], namespace: str, concurrency: int
) -> None:
    """Each of the namespace's pods without a node, to the nodes in turn."""
    names = [str(node["metadata"]["name"]) for node in nodes]
    pending = (
        pod["metadata"]
        for pod in pods
        if pod["metadata"]["namespace"] == namespace and not pod["spec"].get("nodeName")
    )
    targets = enumerate(pending)

    async def worker() -> None:
        for index, meta in targets:
            name = meta["name"]
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": names[index % len(names)]},
            }
            path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
            await api.post(path, body, content_type=PROTOBUF)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    api = Api(load_credentials(args.kubeconfig))
    try:
        (nodes, _), (pods, version) = await asyncio.gather(
            list_all(api, "/api/v1/nodes"), list_all(api, "/api/v1/pods")
        )
        async with asyncio.TaskGroup() as tasks:
            jobs = [
                tasks.create_task(watch_pods(api, version)),
                tasks.create_task(bind(api, nodes, pods, args.namespace, args.concurrency)),
            ]
            await stop.wait()
            for job in jobs:
                job.cancel()
    finally:
        await api.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True, help="whose pods to bind")
    parser.add_argument("--concurrency", type=int, default=64, help="binds in flight")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
