"""What a session reports besides its decisions: timings and the queues' fair shares."""

from batchsched.config.load import default_config
from batchsched.framework.session import Timings
from batchsched.scheduler import run_session

from tests.support.objects import gang, node, queue, snapshot_of


def test_every_action_and_plugin_is_timed() -> None:
    config = default_config()
    timings = Timings()
    run_session(
        snapshot_of([node("n1"), *gang("g", 2, requests={"cpu": "1"})]), config, timings=timings
    )
    assert list(timings.actions) == list(config.actions)
    assert set(timings.plugins) == {p.name for tier in config.tiers for p in tier}
    assert all(seconds >= 0 for seconds in [*timings.actions.values(), *timings.plugins.values()])


def test_proportion_reports_each_queues_deserved_share() -> None:
    objects = [
        node("n1", cpu="8"),
        queue("a", weight=1),
        queue("b", weight=3),
        *gang("ga", 8, requests={"cpu": "1"}, queue="a"),
        *gang("gb", 8, requests={"cpu": "1"}, queue="b"),
    ]
    decisions = run_session(snapshot_of(objects), default_config())
    assert decisions.deserved["a"]["cpu"] == 2000
    assert decisions.deserved["b"]["cpu"] == 6000
    assert decisions.deserved["default"] == {}
