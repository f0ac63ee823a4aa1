"""conformance: Volcano's plugin that keeps preempt and reclaim off the pods the cluster
itself runs on (critical priority classes, kube-system).

batchsched never evicts those pods, whatever the configuration (framework/victims.py),
so this plugin registers nothing: it is accepted so that Volcano's configuration runs
unchanged, and listing it or not changes nothing.
"""

from collections.abc import Mapping
from typing import Any

from batchsched.framework.session import Session
from batchsched.plugins.arguments import check_keys


class Conformance:
    name = "conformance"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        """Nothing to add: the framework already spares what conformance spares."""
