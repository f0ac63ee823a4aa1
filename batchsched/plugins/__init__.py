"""Plugins, one concern each; the configuration names them."""

from collections.abc import Callable, Mapping
from typing import Any

from batchsched.framework.plugin import Plugin
from batchsched.plugins.binpack import Binpack
from batchsched.plugins.gang import Gang
from batchsched.plugins.gpufragmentation import GpuFragmentation
from batchsched.plugins.nodeaffinityscore import NodeAffinityScore
from batchsched.plugins.podaffinityscore import InterPodAffinityScore
from batchsched.plugins.predicates import Predicates
from batchsched.plugins.priority import Priority
from batchsched.plugins.proportion import Proportion
from batchsched.plugins.spreadscore import PodTopologySpreadScore
from batchsched.plugins.taintscore import TaintTolerationScore

PLUGINS: dict[str, Callable[[Mapping[str, Any]], Plugin]] = {
    "binpack": Binpack,
    "gang": Gang,
    "gpufragmentation": GpuFragmentation,
    "interpodaffinity": InterPodAffinityScore,
    "nodeaffinity": NodeAffinityScore,
    "podtopologyspread": PodTopologySpreadScore,
    "predicates": Predicates,
    "priority": Priority,
    "proportion": Proportion,
    "tainttoleration": TaintTolerationScore,
}
