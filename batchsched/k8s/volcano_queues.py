"""Volcano's `root` and `default` Queues, created as Volcano's scheduler creates them.

vc-scheduler creates both at start-up unless they exist (Volcano v1.15.1,
pkg/scheduler/cache/cache.go): `root`, not reclaimable, and the queue of its
`--default-queue` flag (`default`), reclaimable, both of weight 1 and nothing else set.
Volcano's admission webhook refuses a Job or PodGroup whose queue does not exist, and
its job controller puts a Job that names no queue in `default`: a cluster whose
vc-scheduler batchsched replaces needs them as much as one where it runs. So they are
created when batchsched serves Volcano's scheduler name and Volcano's Queue kind is
served; a Queue that exists is left as it is, whatever it says.

Every replica does it at start-up, as each of Volcano's does: creating what does not
exist is the same whoever does it, and it decides nothing. Unlike Volcano's scheduler,
which exits when it cannot, batchsched logs why and goes on scheduling: jobs in a
missing `default` queue are scheduled in the one the core implies (docs/drop-in.md).
"""

import logging
from functools import partial

from batchsched.api.queues import DEFAULT_QUEUE, ROOT_QUEUE
from batchsched.k8s.client import JSON, TRANSPORT_ERRORS, ApiError, Requests, with_retries

log = logging.getLogger(__name__)

VOLCANO_SCHEDULER = "volcano"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
QUEUES_PATH = f"/apis/{VOLCANO_QUEUE_API}/queues"
# Each Queue vc-scheduler creates, and whether it is reclaimable, in its order.
STARTING_QUEUES = ((ROOT_QUEUE, False), (DEFAULT_QUEUE, True))
# Volcano's scheduler retries each create for a minute.
RETRY_SECONDS = 60.0


def starting_queue(name: str, reclaimable: bool) -> JSON:
    return {
        "apiVersion": VOLCANO_QUEUE_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"reclaimable": reclaimable, "weight": 1},
    }


async def create_volcano_queues(api: Requests, *, retry_seconds: float = RETRY_SECONDS) -> None:
    """Create Volcano's `root` and `default` Queues where they do not exist; say why
    not when the API server will not have them."""
    try:
        served = await with_retries(
            partial(api.get, f"/apis/{VOLCANO_QUEUE_API}"), seconds=retry_seconds
        )
    except (ApiError, *TRANSPORT_ERRORS) as error:
        # 404: the API group itself is not served.
        if not isinstance(error, ApiError) or error.status != 404:
            log.warning("cannot tell whether Volcano's Queue kind is served: %s", error)
            return
        served = {}
    if not any(r.get("name") == "queues" for r in served.get("resources") or []):
        log.info("Volcano's Queue kind is not served: no root or default Queue to create")
        return
    for name, reclaimable in STARTING_QUEUES:
        try:
            await with_retries(
                partial(_create_unless_there, api, name, reclaimable), seconds=retry_seconds
            )
        except (ApiError, *TRANSPORT_ERRORS) as error:
            log.warning("cannot create Volcano's %r Queue, as its scheduler would: %s", name, error)


async def _create_unless_there(api: Requests, name: str, reclaimable: bool) -> None:
    """Created, or there already (409): the answer says which, so no read is needed."""
    try:
        await api.post(QUEUES_PATH, starting_queue(name, reclaimable))
    except ApiError as error:
        if error.status != 409:
            raise
        log.info("Volcano's %r Queue exists: left as it is", name)
        return
    log.info("created Volcano's %r Queue, as its scheduler does at start-up", name)
