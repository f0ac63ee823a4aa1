"""priority: higher-priority jobs and tasks first (creation time breaks ties in the session)."""

from collections.abc import Mapping
from typing import Any

from batchsched.framework.session import Session
from batchsched.plugins.arguments import check_keys


class Priority:
    name = "priority"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        session.job_keys.append(lambda job: -job.priority)
        session.task_keys.append(lambda task: -task.priority)
