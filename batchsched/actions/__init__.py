"""Actions orchestrate a session; the plugins decide."""

from collections.abc import Callable

from batchsched.actions.allocate import allocate
from batchsched.actions.backfill import backfill
from batchsched.actions.enqueue import enqueue
from batchsched.actions.preempt import preempt
from batchsched.actions.reclaim import reclaim
from batchsched.framework.session import Session

ACTIONS: dict[str, Callable[[Session], None]] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "preempt": preempt,
    "reclaim": reclaim,
    "backfill": backfill,
}
