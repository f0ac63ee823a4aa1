"""How soon a domain could hold a gang, and what would idle meanwhile.

A starving gang holds room in one domain until enough there has freed for it, and what
frees there meanwhile idles. The count reads no run time (most pods state none; where
they state `activeDeadlineSeconds`, held room is lent by it, framework/reservations.py),
and a gang's members end together, so what it costs is governed by how many distinct
jobs must end: were run times memoryless, the wait for the last of k jobs is the
harmonic number H_k of run times, every job ending early idles its room until the
last, and the room free now idles all the while (`idle_held`). A pod of no gang
(another scheduler's, a DaemonSet's) counts as a job of its own.
"""

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from batchsched.framework.plugin import slots
from batchsched.model.arrays import BoolArray, FloatArray, IntArray, request_row
from batchsched.model.snapshot import Snapshot, job_key

# The job id of pods already leaving (deleted): their room frees with no job ending.
LEAVING = -1


# A pod placed by the session: its node row, its job's key and its request.
Placed = tuple[int, str, IntArray]


@dataclass(frozen=True, slots=True)
class Running:
    """The pods holding a node: per pod its row, its job's id (LEAVING: being deleted)
    and its request; `keys` names the jobs by id, `positions` the pods `of` found by
    task key."""

    rows: IntArray
    jobs: IntArray
    vecs: IntArray
    keys: dict[str, int]
    positions: dict[str, int]

    @classmethod
    def of(cls, snapshot: Snapshot) -> "Running":
        column = snapshot.column
        keys: dict[str, int] = {}
        jobs: list[int] = []
        shapes: dict[object, IntArray] = {}
        vecs: list[IntArray] = []
        for _, task in snapshot.placed:
            jobs.append(LEAVING if task.deleting else keys.setdefault(job_key(task), len(keys)))
            vec = shapes.get(task.shape_key)
            if vec is None:
                vec = shapes[task.shape_key] = request_row(task.request, column)
            vecs.append(vec)
        return cls(
            rows=np.array([row for row, _ in snapshot.placed], dtype=np.int64),
            jobs=np.array(jobs, dtype=np.int64),
            vecs=np.array(vecs, dtype=np.int64).reshape(len(vecs), len(column)),
            keys=keys,
            positions={task.key: at for at, (_, task) in enumerate(snapshot.placed)},
        )

    def changed(self, gone: Collection[str], pods: Collection[Placed]) -> "Running":
        """These but those of `gone` (task keys: evicted), and `pods` (placed)."""
        if not gone and not pods:
            return self
        kept = np.ones(self.rows.size, dtype=np.bool_)
        kept[[self.positions[key] for key in gone]] = False
        keys = dict(self.keys)
        jobs = [keys.setdefault(key, len(keys)) for _, key, _ in pods]
        added = np.array([vec for _, _, vec in pods], dtype=np.int64)
        return Running(
            rows=np.concatenate([self.rows[kept], [row for row, _, _ in pods]]).astype(np.int64),
            jobs=np.concatenate([self.jobs[kept], jobs]).astype(np.int64),
            vecs=np.concatenate([self.vecs[kept], added.reshape(len(pods), self.vecs.shape[1])]),
            keys=keys,
            positions={},
        )


def jobs_to_end(
    running: Running,
    free: IntArray,
    binned: IntArray,
    candidates: IntArray,
    shapes: Sequence[tuple[IntArray, int]],
    own: Sequence[str],
) -> FloatArray:
    """Per domain of `candidates` (bins of `binned`, one per node), how many
    running jobs (of `running`, but the gang's `own`) whose room, added to the domain's
    `free` room and what leaving pods free, holds the members (`shapes`: each request
    and how many members ask it): as the placement's fit test, each shape's members
    must have a node's room each, and their requests in sum fit. Found greedily: the
    job making room for the most members next (of two alike, the one freeing the most
    of what they ask), until they fit: never fewer than the fewest, now and then more (the
    job picked for the members it makes room for now need not be among the fewest);
    inf where they would not even once every job ended. A pass per domain: the caller
    counts a few (framework/topology.py counts the roomiest 16)."""
    if candidates.size < 2:
        return np.zeros(candidates.size)
    asked = np.flatnonzero(np.sum([vec for vec, _ in shapes], axis=0) > 0)
    shapes = [(vec[asked], number) for vec, number in shapes if vec.any()]
    need = np.sum([vec * number for vec, number in shapes], axis=0)
    found = np.full(candidates.size, np.inf)
    skip = [running.keys[key] for key in own if key in running.keys]
    pods = ~np.isin(running.jobs, skip)
    rows, jobs, vecs = running.rows[pods], running.jobs[pods], running.vecs[pods][:, asked]
    pod_bins = binned[rows]
    local = np.zeros(len(binned), dtype=np.int64)
    for at, domain in enumerate(candidates.tolist()):
        nodes = np.flatnonzero(binned == domain)
        local[nodes] = np.arange(nodes.size)
        here = np.flatnonzero(pod_bins == domain)
        room = free[np.ix_(nodes, asked)].copy()
        leaving = jobs[here] == LEAVING
        np.add.at(room, local[rows[here[leaving]]], vecs[here[leaving]])
        here = here[~leaving]
        # What each job frees on each node of the domain: one entry per (job, node).
        ids, job_of = np.unique(jobs[here], return_inverse=True)
        pairs, pair_of = np.unique(job_of * nodes.size + local[rows[here]], return_inverse=True)
        freed = np.zeros((pairs.size, asked.size), dtype=np.int64)
        np.add.at(freed, pair_of, vecs[here])
        ending = _Ending(pairs // nodes.size, pairs % nodes.size, freed, ids.size)
        found[at] = ending.fewest(room, shapes, need)
    return found


@dataclass(frozen=True, slots=True)
class _Ending:
    """What ending each of `count` jobs frees: per entry, the job, the node and the room."""

    job: IntArray
    node: IntArray
    freed: IntArray
    count: int

    def fewest(
        self, room: IntArray, shapes: Sequence[tuple[IntArray, int]], need: IntArray
    ) -> float:
        """How many jobs must end, picked greedily, before `room` (node x resource)
        holds the members; inf when even all of them ending is short."""
        room = room.copy()
        held = [slots(room, vec) for vec, _ in shapes]
        by_job = np.zeros((self.count, need.size), dtype=np.int64)
        np.add.at(by_job, self.job, self.freed)
        left: BoolArray = np.ones(self.count, dtype=np.bool_)
        ended = 0
        while True:
            fits = all(h.sum() >= number for h, (_, number) in zip(held, shapes, strict=True))
            if fits and (room.sum(axis=0) >= need).all():
                return float(ended)
            if not left.any():
                return np.inf
            live = left[self.job]
            job, node = self.job[live], self.node[live]
            after = room[node] + self.freed[live]
            placeable = np.zeros(self.count)
            for (vec, number), now in zip(shapes, held, strict=True):
                gain = np.bincount(job, slots(after, vec) - now[node], self.count)
                placeable += np.minimum(now.sum() + gain, number)
            share = (np.minimum(room.sum(axis=0) + by_job, need) / np.maximum(need, 1)).sum(axis=1)
            order = np.lexsort((-share, -placeable))
            best = int(order[left[order]][0])
            mine = self.job == best
            np.add.at(room, self.node[mine], self.freed[mine])
            for (vec, _), now in zip(shapes, held, strict=True):
                now[self.node[mine]] = slots(room[self.node[mine]], vec)
            left[best] = False
            ended += 1


def idle_held(ends: FloatArray, covered: FloatArray) -> FloatArray:
    """Per domain, what idles while it is held for a gang, in the gang's asks times a
    mean run time, were run times memoryless: the domain is ready once the last of the
    `ends` jobs ends (H_k on average), the room free now (`covered`, a share of the
    asks; none where pods overcommit it) idles all that while, and each job's room from
    its own end (at 1) on. Nothing where no job must end; inf where no count was made
    or none would do. Rounded, so that domains alike in exact terms tie."""
    finite = np.isfinite(ends)
    counts = np.where(finite, ends, 0).astype(np.int64)
    harmonic = np.concatenate([[0.0], np.cumsum(1 / np.arange(1, counts.max(initial=0) + 1))])
    idle = np.where(counts == 0, 0.0, harmonic[counts] - 1 + np.clip(covered, 0.0, 1.0))
    return np.where(finite, idle.round(9), np.inf)
