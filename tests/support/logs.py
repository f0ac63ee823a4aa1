"""The process's logging put back after each test of a module that configures it, as
`batchsched run` does: import `restore_logging` into the module (it applies itself)."""

import logging
from collections.abc import Iterator

import pytest

from batchsched.logs import EXIT


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    ours = logging.getLogger("batchsched")
    saved = (root.handlers[:], root.level, ours.level, EXIT.handlers[:], EXIT.propagate)
    yield
    root.handlers[:], root.level, ours.level, EXIT.handlers[:], EXIT.propagate = saved
