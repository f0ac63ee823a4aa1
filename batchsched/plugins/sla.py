"""sla: Volcano's service-level plugin. A job may state how long it may wait (its
PodGroup's `volcano.sh/sla-waiting-time` annotation, else the plugin's
`sla-waiting-time` argument); jobs then go in order of when their wait runs out, before
jobs that state none, and a job past its wait is admitted without idle room and has
room held for it, as a starving gang has (actions/allocate.py). A job that states no
wait is left as it is.

Differences from Volcano, whose permit can override its later tiers: a job past its
wait is still held to its queue's state, capability and guarantees, which Volcano's
proportion in a later tier would not get to say.
"""

from collections.abc import Mapping
from typing import Any

from batchsched.api.groups import parse_duration
from batchsched.framework.session import Session
from batchsched.model.snapshot import JobInfo
from batchsched.plugins.arguments import check_keys

WAITING_TIME = "sla-waiting-time"


class Sla:
    name = "sla"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {WAITING_TIME})
        self.waiting: float | None = None
        if WAITING_TIME in arguments:
            self.waiting = parse_duration(
                arguments[WAITING_TIME], where=f"plugin {self.name}: {WAITING_TIME}"
            )

    def open(self, session: Session) -> None:
        session.job_keys.append(self._deadline)
        session.waiting_limits.append(self._limit)

    def _limit(self, job: JobInfo) -> float | None:
        stated = job.group.waiting_seconds if job.group is not None else None
        return stated if stated is not None else self.waiting

    def _deadline(self, job: JobInfo) -> float:
        limit = self._limit(job)
        return float("inf") if limit is None else job.creation + limit
