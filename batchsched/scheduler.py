"""The scheduling core assembled: a configuration's plugins open a session on a snapshot
and its actions run in order. The operator, the simulator and `explain` all schedule
through here, so they run the same actions the same way."""

import time
from collections.abc import Sequence

from batchsched.actions import ACTIONS
from batchsched.config.load import SchedulerConfig
from batchsched.framework.devices import DeviceMemo
from batchsched.framework.session import CommitHandler, Session, Timings
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import Snapshot


def open_session(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    timings: Timings | None = None,
    on_commit: CommitHandler | None = None,
    devices: DeviceMemo | None = None,
) -> Session:
    """A session over `snapshot` with the configuration's plugins opened on it; what
    device allocation keeps between sessions in `devices` (none: built afresh)."""
    return Session(
        snapshot,
        tiers=config.tiers,
        starvation_seconds=config.starvation_seconds,
        timings=timings,
        on_commit=on_commit,
        evict_other_schedulers=config.preempt_other_schedulers,
        topology_tiers=config.topology_tiers,
        topology_soft_wait=config.topology_soft_wait,
        devices=devices,
    )


def run_actions(session: Session, actions: Sequence[str]) -> Decisions:
    """Run the actions in order on an open session, timing each, and close it."""
    for action in actions:
        started = time.perf_counter()
        ACTIONS[action](session)
        session.timings.actions[action] = time.perf_counter() - started
    return session.close()


def run_session(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    timings: Timings | None = None,
    on_commit: CommitHandler | None = None,
    devices: DeviceMemo | None = None,
) -> Decisions:
    """The scheduling core: a snapshot in, decisions out, no I/O; `timings` are filled in
    and `on_commit` hears each job's bindings as soon as they are final; `devices`, as
    open_session's."""
    session = open_session(
        snapshot,
        config,
        timings=timings,
        on_commit=on_commit,
        devices=devices,
    )
    return run_actions(session, config.actions)
