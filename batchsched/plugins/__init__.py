"""Plugins, one concern each; the configuration names them."""

from collections.abc import Callable, Mapping
from typing import Any

from batchsched.framework.session import Plugin
from batchsched.plugins.allocation import BalancedAllocation, LeastAllocated
from batchsched.plugins.binpack import Binpack
from batchsched.plugins.conformance import Conformance
from batchsched.plugins.drf import Drf
from batchsched.plugins.gang import Gang
from batchsched.plugins.gpufragmentation import GpuFragmentation
from batchsched.plugins.interpodaffinity import InterPodAffinityScore
from batchsched.plugins.networktopologyaware import NetworkTopologyAware
from batchsched.plugins.nodeaffinity import NodeAffinityScore
from batchsched.plugins.nodeorder import NodeOrder
from batchsched.plugins.overcommit import Overcommit
from batchsched.plugins.podtopologyspread import PodTopologySpreadScore
from batchsched.plugins.predicates import Predicates
from batchsched.plugins.priority import Priority
from batchsched.plugins.proportion import Capacity, Proportion
from batchsched.plugins.sla import Sla
from batchsched.plugins.tainttoleration import TaintTolerationScore

PLUGINS: dict[str, Callable[[Mapping[str, Any]], Plugin]] = {
    "balancedallocation": BalancedAllocation,
    "binpack": Binpack,
    "capacity": Capacity,
    "conformance": Conformance,
    "drf": Drf,
    "gang": Gang,
    "gpufragmentation": GpuFragmentation,
    "interpodaffinity": InterPodAffinityScore,
    "leastallocated": LeastAllocated,
    "network-topology-aware": NetworkTopologyAware,
    "nodeaffinity": NodeAffinityScore,
    "nodeorder": NodeOrder,
    "overcommit": Overcommit,
    "podtopologyspread": PodTopologySpreadScore,
    "predicates": Predicates,
    "priority": Priority,
    "proportion": Proportion,
    "sla": Sla,
    "tainttoleration": TaintTolerationScore,
}
