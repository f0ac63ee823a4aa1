"""Namespaces: their labels, and the queue their jobs default to."""

import re

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.namespaces import namespace_from_object
from batchsched.api.objects import QueueName

from tests.support.objects import Obj

KEY = "scheduling.batchsched.io/queue-name"


def namespace(*, labels: Obj | None = None, annotations: Obj | None = None) -> Obj:
    meta: Obj = {"name": "ml", "labels": labels or {}, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


@pytest.mark.parametrize(
    ("obj", "queue"),
    [
        (
            namespace(labels={KEY: "from-label"}, annotations={KEY: "from-note"}),
            QueueName("from-note", f"Namespace ml's annotation {KEY}"),
        ),
        (
            namespace(labels={KEY: "from-label"}),
            QueueName("from-label", f"Namespace ml's label {KEY}"),
        ),
        (namespace(labels={"tier": "gold"}), None),
    ],
    ids=["annotation-wins", "label", "none"],
)
def test_a_namespace_names_its_queue(obj: Obj, queue: QueueName | None) -> None:
    parsed = namespace_from_object(obj)
    assert parsed.queue == queue
    assert parsed.labels["kubernetes.io/metadata.name"] == "ml"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (namespace(annotations={KEY: ""}), f"Namespace ml: annotation {KEY}='' must name a queue"),
        (namespace(labels={KEY: 7}), f"Namespace ml: label {KEY}=7 must name a queue"),
        (
            namespace(labels={KEY: "ok"}, annotations={KEY: ["a"]}),
            f"Namespace ml: annotation {KEY}=['a'] must name a queue",
        ),
    ],
    ids=["empty-annotation", "number-label", "list-annotation"],
)
def test_a_queue_setting_naming_no_queue_refuses_the_namespace(obj: Obj, message: str) -> None:
    with pytest.raises(InvalidObject, match=re.escape(message)):
        namespace_from_object(obj)
