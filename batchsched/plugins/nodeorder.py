"""nodeorder: Volcano's node scoring plugin, kube-scheduler's score plugins under one name
with a weight each, so that Volcano's configuration scores nodes as Volcano would.

Each part is batchsched's own scorer for it, registered with the weight the arguments
give (Volcano's defaults below; 0 leaves a part out):

| argument                  | default | scorer                                    |
| leastrequested.weight     | 1       | leastallocated (CPU and memory)           |
| mostrequested.weight      | 0       | binpack, linear on CPU and memory         |
| balancedresource.weight   | 1       | balancedallocation (CPU, memory, GPUs)    |
| nodeaffinity.weight       | 2       | nodeaffinity                              |
| podaffinity.weight        | 2       | interpodaffinity                          |
| tainttoleration.weight    | 3       | tainttoleration                           |
| podtopologyspread.weight  | 2       | podtopologyspread, without defaults       |
| imagelocality.weight      | 1       | none: logged at load, it has no effect    |

Where batchsched's scorer differs from what Volcano calls: preferred node affinity is
normalized over the nodes that fit (kube-scheduler normalizes it; Volcano's nodeorder
does not), and topology spread has no cluster defaults (Volcano applies kube-scheduler's
system defaults, which find a pod's peers through Services and ReplicaSets that
batchsched does not watch). Image locality needs the images each node holds, which
batchsched does not read.
"""

import logging
from collections.abc import Callable, Mapping
from typing import Any

from batchsched.framework.session import Plugin, Session
from batchsched.plugins.allocation import BalancedAllocation, LeastAllocated
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.binpack import Binpack
from batchsched.plugins.interpodaffinity import InterPodAffinityScore
from batchsched.plugins.nodeaffinity import NodeAffinityScore
from batchsched.plugins.podtopologyspread import PodTopologySpreadScore
from batchsched.plugins.tainttoleration import TaintTolerationScore

log = logging.getLogger(__name__)

IMAGE_LOCALITY = "imagelocality.weight"
# Argument -> Volcano's default weight, and the scorer it stands for with its arguments.
PARTS: dict[str, tuple[int, Callable[[Mapping[str, Any]], Plugin], Mapping[str, Any]]] = {
    "leastrequested.weight": (1, LeastAllocated, {}),
    "mostrequested.weight": (0, Binpack, {}),
    "balancedresource.weight": (
        1,
        BalancedAllocation,
        {"resources": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}},
    ),
    "nodeaffinity.weight": (2, NodeAffinityScore, {}),
    "podaffinity.weight": (2, InterPodAffinityScore, {}),
    "tainttoleration.weight": (3, TaintTolerationScore, {}),
    "podtopologyspread.weight": (2, PodTopologySpreadScore, {}),
}
# The plugins nodeorder stands for, which a configuration may not list beside it:
# each would score twice.
PART_NAMES = frozenset(
    {"leastallocated", "balancedallocation", "nodeaffinity", "interpodaffinity"}
    | {"tainttoleration", "podtopologyspread"}
)


class NodeOrder:
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {*PARTS, IMAGE_LOCALITY})
        self.parts: list[Plugin] = []
        for key, (default, make, extra) in PARTS.items():
            weight = integer(self.name, key, arguments.get(key, default), low=0, high=100)
            if weight:
                self.parts.append(make({**extra, "weight": weight}))
        if integer(self.name, IMAGE_LOCALITY, arguments.get(IMAGE_LOCALITY, 1), low=0):
            log.warning(
                "plugin nodeorder: %s has no effect here: batchsched does not read the "
                "images nodes hold",
                IMAGE_LOCALITY,
            )

    def open(self, session: Session) -> None:
        for part in self.parts:
            part.open(session)
