"""Reading YAML in bulk with libyaml's C parser: PyYAML's pure-Python one made reading a
large simulator input cost many times its scheduling (figures in docs/benchmarks.md).

Both make the same objects from the same text (tests/unit/api/test_yamlload.py checks
it on the repository's files); PyYAML's own loader stands in only where PyYAML was built
without libyaml, and says so once.
"""

import functools
import logging
from typing import Any

import yaml

log = logging.getLogger(__name__)


@functools.cache
def safe_loader() -> type[yaml.SafeLoader] | type[yaml.CSafeLoader]:
    """The fastest loader that builds only plain objects, as yaml.safe_load does."""
    if yaml.__with_libyaml__:
        return yaml.CSafeLoader
    log.warning("PyYAML has no libyaml here: YAML is read by its slower pure-Python loader")
    return yaml.SafeLoader


def load_all(text: str) -> list[Any]:
    """Every document in `text`, as yaml.safe_load_all reads them."""
    return list(yaml.load_all(text, Loader=safe_loader()))
