"""Each job's bindings are handed out the moment they are final, so a shell can bind the
first gangs while the session still places the rest."""

from collections.abc import Sequence

from batchsched.config.load import default_config
from batchsched.model.decisions import Binding
from batchsched.scheduler import run_session

from tests.support.objects import gang, node, snapshot_of


def test_committed_jobs_are_heard_one_by_one_and_add_up_to_the_decisions() -> None:
    objects = [
        node("n1", cpu="4"),
        *gang("a", 2, requests={"cpu": "1"}),
        *gang("b", 2, requests={"cpu": "1"}),
        # Does not fit: undone, so never heard of.
        *gang("c", 3, requests={"cpu": "1"}),
    ]
    heard: list[list[Binding]] = []

    def on_commit(bindings: Sequence[Binding]) -> None:
        heard.append(list(bindings))

    decisions = run_session(snapshot_of(objects), default_config(), on_commit=on_commit)
    assert [{b.job for b in batch} for batch in heard] == [{"default/a"}, {"default/b"}]
    assert [b for batch in heard for b in batch] == decisions.bindings
    assert "default/c-0" in decisions.pending
