"""priority: higher-priority jobs and tasks first (creation time breaks ties in the
session), and the preempt action's victims are of lower priority than the preemptor."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.framework.session import Session
from batchsched.framework.victims import Victims
from batchsched.model.arrays import BoolArray
from batchsched.model.snapshot import JobInfo
from batchsched.plugins.arguments import check_keys


class Priority:
    name = "priority"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        session.job_keys.append(lambda job: -job.priority)
        session.task_keys.append(lambda task: -task.priority)
        session.preemptable.append(_lower_priority)


def _lower_priority(job: JobInfo, victims: Victims) -> BoolArray:
    return np.asarray(victims.priority < job.priority, dtype=np.bool_)
