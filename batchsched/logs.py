"""Log output of `batchsched run`: text or one JSON object per line, at a klog-style
verbosity.

JSON lines are written with the standard library's json and logging alone: the four
fields log collectors index need no dependency of their own in the image.

Verbosity follows kube-scheduler's `--v`, mapped onto Python's levels: 0 (default)
logs batchsched's INFO and above and libraries' warnings; 1 to 3 add batchsched's
DEBUG lines; 4 and above add every library's DEBUG lines too (aiohttp, asyncio).
"""

import json
import logging
import sys
from datetime import UTC, datetime

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The one line a process ends with, whatever the format; see `configure`.
EXIT = logging.getLogger("batchsched.exit")
ALL_DEBUG_VERBOSITY = 4


class JsonFormatter(logging.Formatter):
    """{"time", "level", "logger", "message"} and "exception" when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure(log_format: str, verbosity: int) -> None:
    """Send every log line to stderr in `log_format` at `verbosity`.

    In text the exit line reads `batchsched: <why>`, as the command's other errors do,
    so the last line of a crashed pod's log says why on its own.
    """
    json_lines = log_format == "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= ALL_DEBUG_VERBOSITY else logging.WARNING)
    logging.getLogger("batchsched").setLevel(logging.DEBUG if verbosity else logging.INFO)
    exit_handler = logging.StreamHandler(sys.stderr)
    exit_handler.setFormatter(
        JsonFormatter() if json_lines else logging.Formatter("batchsched: %(message)s")
    )
    EXIT.handlers[:] = [exit_handler]
    EXIT.propagate = False
