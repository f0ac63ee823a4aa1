"""Every peer's way of asking for a topology domain, read into one ask; values that
cannot be kept are refused naming the key."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.topology import (
    KUEUE_PODSET_LABEL,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_LAYERS,
    KUEUE_SLICE_SIZE,
    KUEUE_SLICE_TOPOLOGY,
    Mode,
    kueue_topology,
    native_topology,
)

RACK = "topology.kubernetes.io/rack"
WHERE = "Pod default/p"


def test_native_topology_key_is_a_hard_label_ask() -> None:
    """scheduling.k8s.io/v1alpha2 PodGroup spec.schedulingConstraints (for the native
    PodGroup's reader to attach)."""
    ask = native_topology(
        {"topology": [{"key": RACK}]}, where="PodGroup d/g.spec.schedulingConstraints"
    )
    assert ask is not None
    assert (ask.mode, ask.key) == (Mode.HARD, RACK)
    assert ask.where == "PodGroup d/g.spec.schedulingConstraints.topology[0].key"
    assert native_topology({}, where="x") is None
    with pytest.raises(InvalidObject, match=r"x\.topology: at most one entry"):
        native_topology({"topology": [{"key": "a"}, {"key": "b"}]}, where="x")


def test_kueue_annotations() -> None:
    labels = {KUEUE_PODSET_LABEL: "workers"}
    required = kueue_topology({KUEUE_REQUIRED: RACK}, labels, where=WHERE)
    assert required is not None and required.ask is not None
    assert (required.part, required.ask.mode, required.ask.key) == ("workers", Mode.HARD, RACK)
    preferred = kueue_topology({KUEUE_PREFERRED: RACK}, labels, where=WHERE)
    assert preferred is not None and preferred.ask is not None
    assert preferred.ask.mode is Mode.SOFT
    sliced = kueue_topology(
        {KUEUE_SLICE_TOPOLOGY: RACK, KUEUE_SLICE_SIZE: "4"}, labels, where=WHERE
    )
    assert sliced is not None
    assert (sliced.ask, sliced.slice_key, sliced.slice_size) == (None, RACK, 4)
    assert kueue_topology({}, labels, where=WHERE) is None


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ({KUEUE_SLICE_LAYERS: "[]"}, f"[{KUEUE_SLICE_LAYERS}]: '[]' is not supported"),
        ({KUEUE_REQUIRED: RACK, KUEUE_PREFERRED: RACK}, "may not both be set"),
        ({KUEUE_SLICE_TOPOLOGY: RACK}, "go together"),
        ({KUEUE_SLICE_TOPOLOGY: RACK, KUEUE_SLICE_SIZE: "0"}, "below the minimum of 1"),
    ],
)
def test_kueue_values_that_cannot_be_kept(notes: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidObject) as error:
        kueue_topology(notes, {}, where=WHERE)
    assert str(error.value).startswith(f"{WHERE}.metadata.annotations")
    assert message in str(error.value)
