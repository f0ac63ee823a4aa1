"""/metrics, /healthz and /readyz on one port, served from the operator's event loop.

Serving them from the loop that runs sessions and watches makes /healthz an honest
liveness probe: if the loop ever stalls, the probe times out. /readyz turns ready once
the cache has seen the whole cluster, on standby replicas too, so both replicas of a
Deployment are scraped and neither is restarted for merely waiting on the lease.
"""

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest


async def serve(port: int, *, ready: Callable[[], bool]) -> web.AppRunner:
    """Start serving on all interfaces; the caller cleans up the returned runner."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="waiting for the cache to sync")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, port=port).start()
    return runner
