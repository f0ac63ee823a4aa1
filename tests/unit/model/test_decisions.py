import pickle

from batchsched.model.decisions import Binding, Condition, JobStatus


def test_statuses_pickle_back_to_equal_ones() -> None:
    condition = Condition(type="Unschedulable", reason="NotEnoughResources", message="3/8 fit")
    status = JobStatus(
        key="ns/job",
        namespace="ns",
        name="job",
        phase="Pending",
        min_member=8,
        scheduled=1,
        running=2,
        succeeded=3,
        failed=4,
        condition=condition,
    )
    again = pickle.loads(pickle.dumps(status, pickle.HIGHEST_PROTOCOL))
    assert again == status
    assert again.condition == condition


def test_bindings_pickle_back_to_equal_ones() -> None:
    binding = Binding(namespace="ns", name="p", uid="u", node="n", job="ns/job", gpu_index=(1, 3))
    again = pickle.loads(pickle.dumps(binding, pickle.HIGHEST_PROTOCOL))
    assert again == binding
    assert again.key == "ns/p"
