"""scheduler-plugins' released source tree, for its documented examples. Its CRDs are
the released ones the session's control plane installs (tests.support.peer_crds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import peer_source


@pytest.fixture(name="scheduler_plugins", scope="module")
def scheduler_plugins_fixture() -> Path:
    """scheduler-plugins' released module (hack/peers/scheduler-plugins/go.mod)."""
    return peer_source("scheduler-plugins")
