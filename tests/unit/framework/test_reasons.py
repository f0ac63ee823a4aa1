"""Callbacks carry the plugin that registered them, and pending reasons carry a code and
that plugin besides their message: what Volcano's enable flags, the status writer,
explain and the gang plugin act on instead of words."""

import pickle

from batchsched.api.unsupported import GATED_MESSAGE
from batchsched.config.load import default_config, load_config
from batchsched.framework.session import Session
from batchsched.model.reasons import SESSION, Code, Reason

from tests.support.objects import decide, gang, node, pod, pod_group, queue, snapshot_of

GATES = {"schedulingGates": [{"name": "example.com/wait"}]}
VOLCANO = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: nodeorder, enableNodeOrder: false}
  - {name: binpack}
"""


def test_callbacks_carry_the_plugin_that_registered_them() -> None:
    """Parts opened by a plugin (predicates' filters) are that plugin's; the session's
    own card filter is the session's."""
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    spread["labelSelector"] = {"matchLabels": {"app": "a"}}
    spreading = pod("p", labels={"app": "a"}, spec={"topologySpreadConstraints": [spread]})
    session = Session(snapshot_of([node("n1"), spreading]), tiers=default_config().tiers)
    assert [plugin for plugin, _ in session.valid_checks.named()] == ["gang", "proportion"]
    assert [(plugin, f.name) for plugin, f in session.filters.named()] == [
        ("predicates", "predicates"),
        (SESSION, "GpuCards"),
    ]
    assert [(plugin, f.name) for plugin, f in session.fresh_filters.named()] == [
        ("predicates", "TopologySpread")
    ]
    assert [plugin for plugin, _ in session.scorers.named()] == ["binpack"]


def test_an_enable_flag_drops_the_plugins_callbacks_of_that_kind_by_its_name() -> None:
    """nodeorder's scorers are those of the parts it opens: all go, binpack's stay."""
    session = Session(snapshot_of([node("n1"), pod("p")]), tiers=load_config(VOLCANO).tiers)
    assert [plugin for plugin, _ in session.scorers.named()] == ["binpack"]
    assert not session.normalized_scorers
    kept = Session(
        snapshot_of([node("n1"), pod("p")]),
        tiers=load_config(VOLCANO.replace(", enableNodeOrder: false", "")).tiers,
    )
    assert {plugin for plugin, _ in kept.scorers.named()} == {"nodeorder", "binpack"}


def test_pending_reasons_carry_their_code_and_plugin() -> None:
    decisions = decide(
        [
            node("n1", cpu="4"),
            pod("huge", requests={"cpu": "8"}),
            pod("gated", spec=GATES),
            pod("lost", group="nowhere"),
            *gang("orphan", 1, requests={"cpu": "1"}, queue="nope"),
        ]
    )
    found = {key: (r.code, r.plugin) for key, r in decisions.pending.items()}
    assert found == {
        "default/huge": (Code.UNSCHEDULABLE, "predicates"),
        "default/gated": (Code.GATED, SESSION),
        "default/lost": (Code.INVALID, "gang"),
        "default/orphan-0": (Code.INVALID, "proportion"),
    }
    assert decisions.pending["default/gated"] == GATED_MESSAGE


def test_a_queue_over_its_share_is_said_by_proportion() -> None:
    objects = [node("n1", cpu="2"), queue("a"), queue("b")]
    for name in ("a0", "a1", "b0", "b1"):
        objects += gang(name, 1, requests={"cpu": "1"}, queue=name[0])
    reason = decide(objects).pending["default/a1-0"]
    assert (reason.code, reason.plugin, reason) == (
        Code.AT_FAIR_SHARE,
        "proportion",
        "queue a is at its fair share",
    )


def test_a_gang_waiting_for_a_gated_member_is_blocked_not_gated() -> None:
    """Only the gated pod itself is gated (no event, SchedulingGated); the members that
    wait for it are told why, and the schedule timeout rewords their reason."""
    objects = [
        node("n1", cpu="4"),
        pod_group("g", 2),
        pod("g-0", requests={"cpu": "1"}, group="g"),
        pod("g-1", requests={"cpu": "1"}, group="g", spec=GATES),
    ]
    pending = decide(objects).pending
    assert (pending["default/g-0"].code, pending["default/g-1"].code) == (
        Code.BLOCKED,
        Code.GATED,
    )


def test_a_reason_survives_the_trip_back_from_a_session_process() -> None:
    reason = Reason(Code.AT_FAIR_SHARE, "proportion", "queue a is at its fair share")
    back = pickle.loads(pickle.dumps({"default/p": reason}))["default/p"]
    assert (back.code, back.plugin, back.message, type(back)) == (
        reason.code,
        reason.plugin,
        reason.message,
        Reason,
    )
