"""What keeps fragmentation scoring cheap must not change what it computes: classes grouped
by shape, rows in equal states evaluated once, and the plugin's scores kept per shape."""

import numpy as np

from batchsched.api.gpu import GPU_MILLI, GPU_MODEL_LABEL, GpuDemand
from batchsched.api.objects import Constraints, Node
from batchsched.api.resources import GPU
from batchsched.api.selectors import Requirement
from batchsched.config.load import load_config
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.plugins.fragmentation import InstanceFragmentationModel, TaskClass
from batchsched.plugins.gpufragmentation import GpuFragmentation, _points

from tests.support.objects import node, pod, snapshot_of


def on(*models: str) -> Constraints:
    return Constraints(affinity=((Requirement(GPU_MODEL_LABEL, "In", models),),))


NODES = [Node(f"n{i}", {}, {GPU_MODEL_LABEL: model}) for i, model in enumerate(["A", "B", "A"])]
SHARE = GpuDemand(1, 400)
MIXED = {
    TaskClass(2000, SHARE, Constraints()): 3,
    TaskClass(2000, SHARE, on("A")): 2,
    TaskClass(2000, SHARE, on("B")): 1,
    TaskClass(4000, GpuDemand(1, 1000), on("A", "B")): 2,
    TaskClass(1000, GpuDemand(0, 0), Constraints()): 1,
}


def test_classes_of_one_shape_weigh_per_node_as_the_classes_allowed_there() -> None:
    model = InstanceFragmentationModel(MIXED, NODES)
    # Two shapes with GPUs; the CPU-only class counts in the total only.
    assert model.weights.tolist() == [[5, 2], [4, 2], [5, 2]]
    assert model.total_weight == 9
    rows = np.arange(3, dtype=np.int64)
    free = np.array([[1000, 300], [1000, 300], [600, 0]], dtype=np.int64)
    cpu = np.array([8000, 8000, 8000], dtype=np.int64)
    separate = [
        InstanceFragmentationModel({c: n}, NODES).measure(rows, free, cpu) for c, n in MIXED.items()
    ]
    assert model.measure(rows, free, cpu).tolist() == np.sum(separate, axis=0).tolist()


def test_rows_in_equal_states_get_what_each_gets_alone() -> None:
    rng = np.random.default_rng(0)
    nodes = [Node(f"n{i}", {}, {GPU_MODEL_LABEL: "AB"[i % 2]}) for i in range(200)]
    model = InstanceFragmentationModel(MIXED, nodes)
    rows = np.arange(200, dtype=np.int64)
    # Few distinct states, so most rows repeat one.
    free = rng.choice([0, 300, 600, 1000], size=(200, 2))
    cpu = rng.choice([1000, 8000], size=200)
    sums = model.card_sums(free)
    for task in MIXED:
        together = model.placement(rows, free, sums, cpu, task)
        for row in range(0, 200, 7):
            alone = model.placement(
                rows[row : row + 1],
                free[row : row + 1],
                sums[row : row + 1],
                cpu[row : row + 1],
                task,
            )
            assert together.delta[row] == alone.delta[0]
            assert together.card[row] == alone.card[0]


def test_scores_kept_per_shape_and_state_follow_placements_on_any_pod_of_that_shape() -> None:
    objects = [
        *(
            node(
                f"n{i}", cpu="64", extra={GPU: "2", GPU_MILLI: "2000"}, labels={GPU_MODEL_LABEL: m}
            )
            for i, m in enumerate("ABAB")
        ),
        # Equal shapes that differ in memory or constraints, and whole cards.
        *(
            pod(
                f"s{i}",
                requests={"cpu": "2", "memory": f"{i + 1}Gi", GPU_MILLI: "400"},
                spec={"nodeSelector": {GPU_MODEL_LABEL: "AB"[i % 2]}} if i % 3 else None,
            )
            for i in range(6)
        ),
        *(pod(f"w{i}", requests={"cpu": "4", GPU: "1"}) for i in range(2)),
    ]
    config = load_config("tiers:\n- plugins: [{name: predicates}, {name: gpufragmentation}]\n")
    plugin = config.tiers[0][1]
    assert isinstance(plugin, GpuFragmentation)
    session = Session(snapshot_of(objects), tiers=config.tiers)
    rows = session.all_nodes
    for job in sorted(session.snapshot.jobs.values(), key=lambda j: j.key):
        task = job.pending[0]
        found = plugin._class(task)
        cpu_free = plugin._cpu_free(rows)
        fresh = plugin.model.placement(
            rows, session.gpu.free, plugin.model.card_sums(session.gpu.free), cpu_free, found
        )
        points = plugin.score(task, rows)
        card = plugin._scores(found).card[plugin._state[rows]]
        assert card.tolist() == fresh.card.tolist()
        expected = _points(fresh.delta, plugin.model.total_weight, found, plugin.unit)
        assert points.tolist() == expected.tolist()
        node_row = session.best_node(task)
        assert node_row is not None
        statement = Statement(session, job)
        statement.allocate(task, node_row)
        statement.commit()


def test_counts_per_demand_and_per_cpu_combine_into_each_shape_as_alone() -> None:
    # Shapes crossing three CPU requests with three demands, several sharing each.
    crossed = {
        TaskClass(cpu, demand, Constraints()): 1 + i
        for i, (cpu, demand) in enumerate(
            (cpu, demand)
            for cpu in (0, 2000, 6000)
            for demand in (GpuDemand(1, 300), GpuDemand(1, 1000), GpuDemand(2, 1000))
        )
    }
    model = InstanceFragmentationModel(crossed, NODES)
    assert len(model.cpu) == 9 and len(model.divisor) == 3 and len(model.cpu_divisor) == 3
    rows = np.arange(3, dtype=np.int64)
    free = np.array([[1000, 1000], [700, 1000], [300, 0]], dtype=np.int64)
    cpu = np.array([16000, 5000, 1000], dtype=np.int64)
    separate = [
        InstanceFragmentationModel({c: n}, NODES).measure(rows, free, cpu)
        for c, n in crossed.items()
    ]
    assert model.measure(rows, free, cpu).tolist() == np.sum(separate, axis=0).tolist()
