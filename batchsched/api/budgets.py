"""PodDisruptionBudgets, as preemption reads them: which pods each protects, and how
many of them may still be disrupted (status.disruptionsAllowed, kept by the disruption
controller)."""

from dataclasses import dataclass

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import Obj, describe, mapping, name_of, namespace_of
from batchsched.api.reads import reads
from batchsched.api.selectors import Selector, parse_selector

# What budget_from_object reads (api/reads.py).
BUDGET_READS = reads("PodDisruptionBudget", "spec.selector", "status.disruptionsAllowed")


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    # A nil selector protects nothing, an empty one every pod of the namespace (policy/v1).
    selector: Selector
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def budget_from_object(obj: Obj) -> DisruptionBudget:
    where = describe(obj, kind="PodDisruptionBudget")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    status = mapping(obj.get("status"), where=f"{where}.status")
    allowed = status.get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise InvalidObject(f"{where}.status.disruptionsAllowed: {allowed!r} is not a whole number")
    return DisruptionBudget(
        namespace=namespace_of(obj, kind="PodDisruptionBudget"),
        name=name_of(obj, kind="PodDisruptionBudget"),
        selector=parse_selector(spec.get("selector"), where=f"{where}.spec.selector"),
        disruptions_allowed=allowed,
    )
