"""The selectors of tests/unit/api/test_cel.py against the real API server's CEL compiler.

kube-apiserver v1.36.3 compiles a DeviceClass's selectors when it is written, in the same DRA
environment kube-scheduler evaluates them in. Every selector batchsched compiles must be one
the API server accepts, and every one batchsched refuses as not compiling must be refused
there too (a dry-run create: nothing is stored).
"""

from __future__ import annotations

import pytest

from batchsched.api.cel import CelError, ErrorKind, compile_selector

from tests.support import Kube
from tests.unit.api.test_cel import (
    KUBERNETES_DRA,
    KUBERNETES_LIBRARIES,
    LISTS_SETS_OPTIONALS,
    WRITTEN,
)

pytestmark = pytest.mark.integration

CLASSES = "/apis/resource.k8s.io/v1/deviceclasses?dryRun=All"

SELECTORS = sorted(
    {row[1] for row in KUBERNETES_DRA}
    | {row[0] for row in [*KUBERNETES_LIBRARIES, *LISTS_SETS_OPTIONALS, *WRITTEN]}
)

# `device` is typed by the API server and dynamic here: a selector whose result is a map
# is refused there when written and here when evaluated (docs/benchmarks.md).
REFUSED_THERE_WHEN_WRITTEN = {"device.attributes.model"}


def _class(expression: str) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "cel-check"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def test_the_api_server_compiles_what_batchsched_compiles(kube: Kube) -> None:
    disagreements = []
    for expression in SELECTORS:
        compiled = compile_selector(expression)
        refused_here = isinstance(compiled, CelError) and compiled.kind is ErrorKind.COMPILE
        refused_here = refused_here or expression in REFUSED_THERE_WHEN_WRITTEN
        reply = kube.post(CLASSES, _class(expression))
        assert reply.status in (201, 422), (expression, reply.status, reply.body)
        if refused_here != (reply.status == 422):
            disagreements.append((expression, reply.status, reply.body.get("message")))
    assert disagreements == []
