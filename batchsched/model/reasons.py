"""Why a pod or job waits: a code other modules act on, the plugin that said so, and the
message users read, as kube-scheduler's framework Status carries them.

A Reason is its message (a str): the text written to pods, events and PodGroups is
exactly the words it was given, while the status writer, explain and the gang plugin
act on its code, never on its words.
"""

from enum import StrEnum

# The plugin a reason or a callback belongs to when no configured plugin gave it: the
# session's own checks (its card filter, held room) and the actions' waits.
SESSION = "session"


class Code(StrEnum):
    """What kind of wait a reason states."""

    # No node takes the pod now (the filters' counted reasons).
    UNSCHEDULABLE = "Unschedulable"
    # The pod has scheduling gates left: it is not tried at all.
    GATED = "SchedulingGated"
    # A member asks for what no node will do whatever is placed (a field not honoured, a
    # claim that does not exist, a preference no plugin scores).
    BLOCKED = "Blocked"
    # The job may not be placed as it stands (a plugin's validity check, an object
    # malformed or in conflict).
    INVALID = "Invalid"
    # It names an object that is not there: its PodGroup, queue or PriorityClass.
    NO_POD_GROUP = "NoPodGroup"
    NO_QUEUE = "NoQueue"
    NO_PRIORITY_CLASS = "NoPriorityClass"
    # The API server refused to bind it; it waits out a backoff.
    BIND_REFUSED = "BindRefused"
    # Not admitted: its queue or the cluster's idle room holds it back (enqueue).
    NOT_ADMITTED = "NotAdmitted"
    # A plugin refuses the placement for what its queue holds or may take.
    REFUSED = "Refused"
    # Its queue is over its fair share: its jobs wait for the share (allocate).
    AT_FAIR_SHARE = "AtFairShare"
    # Its queue dequeues in order and a job ahead cannot start.
    IN_ORDER = "InOrder"
    # Room is held for it, past its waiting time, while the nodes drain.
    STARVING = "Starving"
    # Pods are being evicted to make room for it, or were.
    PREEMPTING = "Preempting"
    # No action looked at it in this session.
    NOT_ATTEMPTED = "NotAttempted"


class Reason(str):
    """A message with its code and the name of the plugin it comes from."""

    code: Code
    plugin: str

    def __new__(cls, code: Code, plugin: str, message: str) -> "Reason":
        reason = super().__new__(cls, message)
        reason.code = code
        reason.plugin = plugin
        return reason

    @property
    def message(self) -> str:
        return str.__str__(self)

    def reworded(self, message: str) -> "Reason":
        """The same code and plugin, in other words (a gang's prefix, a note added)."""
        return Reason(self.code, self.plugin, message)

    def __reduce__(self) -> tuple[type, tuple[Code, str, str]]:
        # Decisions come back from the operator's session process pickled.
        return Reason, (self.code, self.plugin, self.message)

    def __repr__(self) -> str:
        return f"Reason({self.code.name}, {self.plugin!r}, {self.message!r})"
