"""`batchsched run`'s log lines: text or JSON, at a klog-style verbosity, and the one
line the process ends with."""

import json
import logging
import sys

import pytest

from batchsched.logs import EXIT, JsonFormatter, configure

from tests.support.logs import restore_logging  # noqa: F401 (autouse fixture)


def emit_one_of_each() -> None:
    for name in ("batchsched.k8s.loop", "aiohttp.client"):
        logger = logging.getLogger(name)
        logger.debug("%s debug", name)
        logger.info("%s info", name)
        logger.warning("%s warning", name)


@pytest.mark.parametrize(
    ("verbosity", "shown"),
    [
        (0, {"batchsched.k8s.loop info", "batchsched.k8s.loop warning", "aiohttp.client warning"}),
        (
            3,
            {
                "batchsched.k8s.loop debug",
                "batchsched.k8s.loop info",
                "batchsched.k8s.loop warning",
                "aiohttp.client warning",
            },
        ),
        (
            4,
            {
                f"{name} {level}"
                for name in ("batchsched.k8s.loop", "aiohttp.client")
                for level in ("debug", "info", "warning")
            },
        ),
    ],
)
def test_verbosity_chooses_the_lines(
    capsys: pytest.CaptureFixture[str], verbosity: int, shown: set[str]
) -> None:
    configure("text", verbosity)
    emit_one_of_each()
    lines = capsys.readouterr().err.splitlines()
    assert {line.partition(": ")[2] for line in lines} == shown


def test_text_lines_and_the_exit_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure("text", 0)
    logging.getLogger("batchsched.k8s.leader").info("acquired lease %s", "ns/x")
    EXIT.error("lost the lease")
    first, last = capsys.readouterr().err.splitlines()
    assert first.endswith(" INFO batchsched.k8s.leader: acquired lease ns/x")
    # The exit line stands alone, written once: not again through the root logger.
    assert last == "batchsched: lost the lease"


def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure("json", 0)
    log = logging.getLogger("batchsched.k8s.binder")
    log.warning("bind of %s refused", "ns/p")
    try:
        raise ValueError("boom")
    except ValueError:
        log.error("failed", exc_info=True)
    EXIT.error("lost the lease")
    warning, error, exit_line = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert warning.keys() == {"time", "level", "logger", "message"}
    assert warning["time"].endswith("+00:00")
    assert (warning["level"], warning["logger"], warning["message"]) == (
        "WARNING",
        "batchsched.k8s.binder",
        "bind of ns/p refused",
    )
    assert error["exception"].startswith("Traceback (most recent call last):")
    assert error["exception"].endswith("ValueError: boom")
    assert (exit_line["logger"], exit_line["message"]) == ("batchsched.exit", "lost the lease")


def test_a_json_line_is_one_line_whatever_the_message() -> None:
    record = logging.LogRecord("batchsched", logging.INFO, __file__, 1, "a\nb", None, None)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line)["message"] == "a\nb"


def test_lines_go_to_stderr_not_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    configure("text", 0)
    logging.getLogger("batchsched").info("hello")
    captured = capsys.readouterr()
    assert (captured.out, captured.err.endswith("batchsched: hello\n")) == ("", True)
    assert all(
        getattr(handler, "stream", None) is sys.stderr for handler in logging.getLogger().handlers
    )
