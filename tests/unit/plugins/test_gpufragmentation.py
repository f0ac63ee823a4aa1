"""The FGD fragmentation measure on hand-worked nodes, and the plugin that places by it."""

from collections import Counter

import numpy as np

from batchsched.api.gpu import GPU_INDEX_ANNOTATION, GPU_MILLI, NO_GPU, GpuDemand
from batchsched.api.objects import Constraints, Node
from batchsched.api.resources import GPU
from batchsched.api.selectors import Requirement
from batchsched.config.load import load_config
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.arrays import IntArray
from batchsched.plugins.fragmentation import (
    FragmentationModel,
    InstanceFragmentationModel,
    Placement,
    TaskClass,
)
from batchsched.plugins.gpufragmentation import GpuFragmentation, _points, smallest_request

from tests.support.objects import Obj, decide, node, pod, snapshot_of

HALF = TaskClass(1000, GpuDemand(1, 500), Constraints())
WHOLE = TaskClass(1000, GpuDemand(1, 1000), Constraints())
CPU_ONLY = TaskClass(1000, NO_GPU, Constraints())
MIX = {HALF: 2, WHOLE: 1, CPU_ONLY: 1}

CONFIG = """
tiers:
- plugins: [{name: predicates}, {name: gpufragmentation}]
"""


def model(nodes: int = 1) -> FragmentationModel:
    return FragmentationModel(MIX, [Node(f"n{i}", {}) for i in range(nodes)])


def total(model: FragmentationModel, free: IntArray, cpu: IntArray) -> int:
    """The weighted fragmentation of all the nodes given."""
    return int(model.measure(np.arange(len(free), dtype=np.int64), free, cpu).sum())


def place(model: FragmentationModel, free: IntArray, cpu: IntArray, task: TaskClass) -> Placement:
    rows = np.arange(len(free), dtype=np.int64)
    return model.placement(rows, free, model.card_sums(free), cpu, task)


def measure(free: list[int], cpu_free: int) -> int:
    cards = np.array([free], dtype=np.int64)
    return total(model(), cards, np.array([cpu_free], dtype=np.int64))


def test_idle_milli_each_class_cannot_use_weighted_by_its_count() -> None:
    # HALF fits, strands the 300 card (x2); WHOLE fits, strands 300; CPU_ONLY strands all.
    assert measure([1000, 300], cpu_free=8000) == 2 * 300 + 300 + 1300


def test_a_class_that_cannot_run_strands_every_idle_card() -> None:
    # With too little CPU neither GPU class fits: all 1300 idle milli count for all four.
    assert measure([1000, 300], cpu_free=500) == 4 * 1300


def test_a_class_limited_to_other_models_strands_everything() -> None:
    elsewhere = Constraints(affinity=((Requirement("model", "In", ("V100",)),),))
    limited = FragmentationModel({TaskClass(0, GpuDemand(1, 500), elsewhere): 1}, [Node("n", {})])
    free = np.array([[1000, 300]], dtype=np.int64)
    assert total(limited, free, np.array([0], dtype=np.int64)) == 1300


def test_a_share_goes_where_it_fills_a_card_rather_than_splitting_one() -> None:
    free = np.array([[1000, 300], [1000, 500]], dtype=np.int64)
    task = TaskClass(1000, GpuDemand(1, 400), Constraints())
    placement = place(model(2), free, np.array([8000, 8000], dtype=np.int64), task)
    # Node 0: only card 0 fits; 1000->600 leaves WHOLE nothing: +900 -300 for it, +0 for
    # HALF, -400 for CPU_ONLY. Node 1: card 1 500->100 strands 100 for HALF and WHOLE.
    assert placement.delta.tolist() == [200, -600]
    assert placement.card.tolist() == [0, 1]


def test_whole_cards_and_cpu_only_tasks_change_cards_without_a_choice() -> None:
    free = np.array([[1000, 1000]], dtype=np.int64)
    cpu = np.array([1500], dtype=np.int64)
    whole = place(model(), free, cpu, WHOLE)
    # 2000 -> 1000 idle: CPU_ONLY -1000; CPU then runs short, so HALF (x2) and WHOLE lose all.
    assert whole.delta.tolist() == [3 * 1000 - 1000]
    assert whole.card.tolist() == [-1]
    cpu_only = place(model(), free, cpu, CPU_ONLY)
    assert cpu_only.delta.tolist() == [3 * 2000]


def instances(mix: dict[TaskClass, int], free: list[int], cpu_free: int) -> int:
    counting = InstanceFragmentationModel(mix, [Node("n", {})])
    cards = np.array([free], dtype=np.int64)
    return total(counting, cards, np.array([cpu_free], dtype=np.int64))


def test_instances_count_what_repeated_tasks_leave_on_a_card() -> None:
    # Two 470 shares fit a fresh card; the paper's measure sees no fragment, this one 60.
    mix = {TaskClass(0, GpuDemand(1, 470), Constraints()): 1}
    assert instances(mix, [1000], cpu_free=0) == 60
    paper = FragmentationModel(mix, [Node("n", {})])
    one_card = np.array([[1000]], dtype=np.int64)
    assert total(paper, one_card, np.array([0], dtype=np.int64)) == 0


def test_instances_are_limited_by_cpu_as_well_as_cards() -> None:
    # Plenty of CPU: HALF fits twice (300 left, x2), WHOLE once (300), CPU_ONLY loses all.
    assert instances(MIX, [1000, 300], cpu_free=8000) == 2 * 300 + 300 + 1300
    # CPU for one task only: HALF uses 500 of 1300 (x2); the paper's measure sees no change.
    assert instances(MIX, [1000, 300], cpu_free=1500) == 2 * 800 + 300 + 1300
    assert measure([1000, 300], cpu_free=1500) == measure([1000, 300], cpu_free=8000)


def test_instance_placement_takes_whole_cards_and_shares_alike() -> None:
    counting = InstanceFragmentationModel(MIX, [Node("n", {})])
    free = np.array([[1000, 1000]], dtype=np.int64)
    cpu = np.array([8000], dtype=np.int64)
    whole = place(counting, free, cpu, WHOLE)
    share = place(counting, free, cpu, TaskClass(1000, GpuDemand(1, 400), Constraints()))
    # Whole: 1000 left, all usable by HALF and WHOLE; CPU_ONLY loses 1000 less.
    assert whole.delta.tolist() == [-1000]
    # Share 400: [600, 1000]: HALF fits 3 (strands 100, x2), WHOLE once (600), CPU_ONLY -400.
    assert share.delta.tolist() == [2 * 100 + 600 - 400]
    assert share.card.tolist() == [0]


def gpu_node(name: str, cards: int) -> Obj:
    return node(name, cpu="64", extra={GPU: str(cards), GPU_MILLI: str(cards * 1000)})


def test_plugin_tops_up_a_used_card_instead_of_opening_a_fresh_node() -> None:
    objects = [
        gpu_node("a", 2),
        gpu_node("b", 2),
        pod(
            "held",
            requests={GPU_MILLI: "500"},
            node_name="b",
            annotations={GPU_INDEX_ANNOTATION: "1"},
        ),
        pod("half", requests={GPU_MILLI: "500"}, created=0),
        # Later arrivals the mix expects: whole cards, which a half-used fresh card strands.
        *(pod(f"whole-{i}", requests={GPU: "1"}, created=1 + i) for i in range(3)),
    ]
    decisions = decide(objects, CONFIG)
    cards = {b.name: (b.node, b.gpu_index) for b in decisions.bindings}
    assert cards["half"] == ("b", (1,))


def test_plugin_learns_each_pending_pod_once_across_sessions() -> None:
    plugin = GpuFragmentation({})
    objects = [gpu_node("a", 1), pod("p", requests={GPU_MILLI: "300"})]
    for _ in range(2):
        Session(snapshot_of(objects), tiers=[[plugin]])
    assert plugin.mix == Counter({TaskClass(0, GpuDemand(1, 300), Constraints()): 1})
    Session(snapshot_of([*objects, pod("q", requests={GPU_MILLI: "300"})]), tiers=[[plugin]])
    assert sum(plugin.mix.values()) == 2


def test_weight_is_checked_at_load() -> None:
    config = load_config(
        "tiers:\n- plugins: [{name: predicates}]\n"
        "- plugins: [{name: gpufragmentation, arguments: {weight: 3}}]\n"
    )
    assert config.tiers[1][0].name == "gpufragmentation"


def tried(session: Session) -> None:
    """Try every pending pod of the session once, in name order, as a replay does."""
    for job in sorted(session.snapshot.jobs.values(), key=lambda j: j.key):
        task = job.pending[0]
        assert session.not_allocatable(job, task) is None
        node_row = session.best_node(task)
        if node_row is not None:
            statement = Statement(session, job)
            statement.allocate(task, node_row)
            statement.commit()


def test_a_prior_counts_as_one_pod_per_class_until_pods_are_seen() -> None:
    plugin = GpuFragmentation({})
    plugin.assume({WHOLE: 3, HALF: 1}, lookahead=False)
    objects = [gpu_node("a", 2), pod("p", requests={"cpu": "1", GPU_MILLI: "500"})]
    session = Session(snapshot_of(objects), tiers=[[plugin]])
    # Two classes: the prior weighs as two pods, spread 3:1, and no pod is seen yet.
    assert plugin.strength == 2
    assert plugin.observed == Counter()
    assert plugin.model.total_weight == 4
    tried(session)
    # One HALF pod seen: 2 * (3:1) / 4 + (0:1), in integers x4 over gcd(2, 4) = 2.
    assert plugin.observed == Counter({HALF: 1})
    assert plugin.mix == Counter({WHOLE: 3, HALF: 1 + 2})


def test_without_lookahead_pending_pods_count_only_once_tried() -> None:
    plugin = GpuFragmentation({})
    plugin.assume({}, lookahead=False)
    objects = [gpu_node("a", 2), *(pod(f"p{i}", requests={GPU_MILLI: "300"}) for i in range(3))]
    session = Session(snapshot_of(objects), tiers=[[plugin]])
    assert plugin.mix == Counter()
    tried(session)
    assert plugin.mix == Counter({TaskClass(0, GpuDemand(1, 300), Constraints()): 3})


def test_scores_follow_the_mix_rebuilt_mid_session_on_every_node() -> None:
    # A prior of four-card tasks, then shares and whole cards of several sizes filling
    # the nodes: the mix the plugin scores by is rebuilt at 1, 3, 7 and 15 pods seen
    # (the prior weighs as one), and the session's choice must be the best by the mix
    # of the moment on every node, not only on those placements touched since.
    rng = np.random.default_rng(7)
    nodes = [gpu_node(f"n{i}", 4) for i in range(6)]
    pods = [
        pod(
            f"p{i:02}",
            requests={"cpu": str(int(rng.integers(1, 8))), GPU_MILLI: str(m)}
            if m < 1000
            else {"cpu": "2", GPU: str(m // 1000)},
        )
        for i, m in enumerate(rng.choice([200, 300, 600, 1000, 2000], size=24))
    ]
    plugin = GpuFragmentation({})
    plugin.assume({TaskClass(16000, GpuDemand(4, 1000), Constraints()): 5}, lookahead=False)
    session = Session(snapshot_of([*nodes, *pods]), tiers=[[plugin]])
    rows = session.all_nodes
    rebuilt = 0
    for job in sorted(session.snapshot.jobs.values(), key=lambda j: j.key):
        task = job.pending[0]
        model = plugin.model
        assert session.not_allocatable(job, task) is None
        rebuilt += plugin.model is not model
        fits = np.array([session.fits(task, row) for row in rows])
        if not fits.any():
            continue
        fresh = np.where(fits, plugin.score(task, rows), -1)
        node_row = session.best_node(task)
        assert node_row == int(fresh.argmax())
        statement = Statement(session, job)
        statement.allocate(task, node_row)
        statement.commit()
    assert rebuilt == 4


def test_the_score_scale_is_the_smallest_gpu_request_of_the_mix() -> None:
    assert smallest_request(MIX) == 500
    assert smallest_request({WHOLE: 2, CPU_ONLY: 5}) == 1000
    assert smallest_request({CPU_ONLY: 1}) == 1000
    # A placement short of the ideal by one unit scores half; by none, full marks.
    delta = np.array([-1000 * 4, (500 - 1000) * 4], dtype=np.int64)
    assert _points(delta, 4, WHOLE, 500).tolist() == [100, 50]


def test_a_plugin_scores_by_the_unit_of_its_mix() -> None:
    plugin = GpuFragmentation({})
    objects = [
        gpu_node("a", 1),
        pod("p", requests={GPU_MILLI: "300"}),
        pod("q", requests={GPU: "1"}),
    ]
    Session(snapshot_of(objects), tiers=[[plugin]])
    assert plugin.unit == 300
