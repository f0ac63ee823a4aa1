"""Statement: tentative placements that are either all committed or all undone.

This is what keeps gangs deadlock-free: a group that cannot reach minMember leaves no
trace, so it never holds resources another group is waiting for.
"""

from batchsched.framework.session import Session
from batchsched.model.decisions import Binding, Nomination
from batchsched.model.snapshot import JobInfo, TaskInfo


class Statement:
    def __init__(self, session: Session, job: JobInfo) -> None:
        self.session = session
        self.job = job
        self.placed: list[tuple[TaskInfo, int]] = []

    def allocate(self, task: TaskInfo, node: int) -> None:
        self.session.allocate(self.job, task, node)
        self.placed.append((task, node))

    def discard(self) -> None:
        for task, node in reversed(self.placed):
            self.session.deallocate(self.job, task, node)
        self.placed.clear()

    def nominate(self) -> None:
        """Keep the placements for the rest of the session but bind nothing: the nodes
        still hold the pods being evicted for them. Each pod is nominated to its node
        instead, and later sessions hold that room for it until it fits."""
        session = self.session
        nodes = session.snapshot.nodes
        session.decisions.nominations.extend(
            Nomination(
                namespace=task.pod.namespace,
                name=task.pod.name,
                uid=task.pod.uid,
                node=nodes[node].name,
                job=self.job.key,
            )
            for task, node in self.placed
        )
        session.pin(self.job.key, len(self.placed))
        self.placed.clear()

    def commit(self) -> None:
        session = self.session
        nodes = session.snapshot.nodes
        session.placed[self.job.key] += len(self.placed)
        session.pin(self.job.key, len(self.placed))
        bindings = [
            Binding(
                namespace=task.pod.namespace,
                name=task.pod.name,
                uid=task.pod.uid,
                node=nodes[node].name,
                job=self.job.key,
                gpu_index=session.gpu.placed.get(task.key, ()),
                claims=session.claim_bindings.get(task.key, ()),
                devices=session.device_allocations(task),
            )
            for task, node in self.placed
        ]
        session.decisions.bindings.extend(bindings)
        if session.on_commit is not None and bindings:
            session.on_commit(bindings)
        self.placed.clear()
