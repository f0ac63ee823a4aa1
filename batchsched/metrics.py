"""Every Prometheus metric batchsched exports, in one place.

Names end in their base unit (seconds) and histograms use kube-scheduler's buckets, so
dashboards and alerts written for the default scheduler read the same here. Resource
amounts are in base units too (cores, bytes), with a `unit` label in the style of
kube-state-metrics, because one metric covers every resource.
"""

from prometheus_client import Counter, Gauge, Histogram


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


SESSION_DURATION = Histogram(
    "batchsched_session_duration_seconds",
    "Time of one scheduling session, from snapshot to decisions handed to the binder.",
    buckets=exponential_buckets(0.001, 2, 15),
)
SESSION_PEAK_RSS = Gauge(
    "batchsched_session_peak_rss_bytes",
    "Highest peak resident memory of any session's process so far (each session is a "
    "forked child; pages it shares with the scheduler's process count in both).",
)
SESSIONS = Counter(
    "batchsched_sessions_total",
    "Session loop ticks: `ran` took a snapshot, `idle` found nothing changed and skipped it.",
    ["outcome"],
)
ACTION_DURATION = Histogram(
    "batchsched_action_duration_seconds",
    "Time spent in each action of a session.",
    ["action"],
    buckets=exponential_buckets(0.0001, 2, 16),
)
PLUGIN_DURATION = Histogram(
    "batchsched_plugin_duration_seconds",
    "Time each plugin takes to open a session (its per-session set-up).",
    ["plugin"],
    buckets=exponential_buckets(0.00001, 1.5, 20),
)
SCHEDULE_ATTEMPTS = Counter(
    "batchsched_schedule_attempts_total",
    "Pods considered by a session: `scheduled` (a node was chosen), `unschedulable` "
    "(left pending), `error` (the chosen node could not be bound).",
    ["result"],
)
POD_CREATION_TO_BOUND = Histogram(
    "batchsched_pod_creation_to_bound_seconds",
    "From a pod's creationTimestamp (one-second resolution) to its successful binding.",
    buckets=exponential_buckets(0.01, 2, 20),
)
# 10 ms to 75 s in steps of 1.5: fine enough to read a p99 of 100 ms.
SLI_BUCKETS = exponential_buckets(0.01, 1.5, 23)
POD_SCHEDULING_SLI = Histogram(
    "batchsched_pod_scheduling_sli_duration_seconds",
    "Per pod of this scheduler, from when it could be scheduled (it was seen created, or "
    "its scheduling gates removed) to when the watch saw it bound, as kube-scheduler's "
    "scheduler_pod_scheduling_sli_duration_seconds; pods already there at start-up count "
    "from their creationTimestamp.",
    buckets=SLI_BUCKETS,
)
GANG_SCHEDULING_SLI = Histogram(
    "batchsched_podgroup_scheduling_sli_duration_seconds",
    "Per gang (pods naming one group), from when its last waiting member could be "
    "scheduled to when the watch saw the last of them bound.",
    buckets=SLI_BUCKETS,
)
BINDING_DURATION = Histogram(
    "batchsched_binding_duration_seconds",
    "Latency of one Binding request to the API server, whatever its outcome.",
    buckets=exponential_buckets(0.001, 2, 15),
)
BINDINGS = Counter(
    "batchsched_bindings_total",
    "Final outcome of each decided bind: bound, refused (403), conflict (409), gone (404), failed "
    "(other errors or retries exhausted), cancelled (another member of its gang failed, "
    "or leadership was lost).",
    ["result"],
)
BINDING_ERRORS = Counter(
    "batchsched_binding_errors_total",
    "Failed Binding requests by HTTP status code, or `timeout` / `connection`.",
    ["code"],
)
API_REQUESTS = Counter(
    "batchsched_api_requests_total",
    "Requests sent to the API server, every attempt counted, by verb (WATCH for a "
    "watch) and HTTP status code, or `timeout` / `connection` when none came.",
    ["verb", "code"],
)
API_REQUEST_RETRIES = Counter(
    "batchsched_api_request_retries_total",
    "Requests sent again, by why: `stale_connection` (its connection failed before an "
    "answer, usually a pooled keep-alive connection the server had closed), "
    "`unauthorized` (a 401, sent with the token read again), or the status code or "
    "`timeout` / `connection` a retry with backoff followed.",
    ["reason"],
)
PENDING_PODS = Gauge(
    "batchsched_pending_pods", "Pods of this scheduler still unbound after the last session."
)
PENDING_GROUPS = Gauge(
    "batchsched_pending_podgroups",
    "Gangs short of minMember after the last session (phase Pending or Inqueue).",
)
QUEUE_ALLOCATED = Gauge(
    "batchsched_queue_allocated",
    "Resources requested by the bound pods of each queue's groups, in base units.",
    ["queue", "resource", "unit"],
)
QUEUE_DESERVED = Gauge(
    "batchsched_queue_deserved",
    "Each queue's fair share computed by the proportion plugin, in base units.",
    ["queue", "resource", "unit"],
)
CLUSTER_ALLOCATABLE = Gauge(
    "batchsched_cluster_allocatable",
    "Allocatable resources summed over all nodes, in base units.",
    ["resource", "unit"],
)
CLUSTER_ALLOCATED = Gauge(
    "batchsched_cluster_allocated",
    "Resources requested by all bound pods (any scheduler), in base units.",
    ["resource", "unit"],
)
INVALID_OBJECTS = Counter(
    "batchsched_invalid_objects_total",
    "Watched objects that could not be used as written, by kind.",
    ["kind"],
)
API_WRITES = Counter(
    "batchsched_api_writes_total",
    "Status patches and events written to the API server, by what and outcome.",
    ["kind", "result"],
)
EVENTS_DROPPED = Counter(
    "batchsched_events_dropped_total",
    "New events not written because their object had too many in a short time (a "
    "burst of 25, then one per 5 minutes, as client-go's spam filter allows), by reason.",
    ["reason"],
)
PREEMPTION_VICTIMS = Counter(
    "batchsched_preemption_victims_total",
    "Pods evicted to make room (or deleted, where a PodDisruptionBudget would refuse the "
    "eviction), counted once the API server accepted it, by the action that chose them: "
    "`preempt` or `reclaim`.",
    ["action"],
)
PREEMPTION_FAILURES = Counter(
    "batchsched_preemption_failures_total",
    "Victims the scheduler chose but did not evict, by why: `refused` (a "
    "PodDisruptionBudget refused the eviction, 429), `error` (any other error, or "
    "retries exhausted), `fenced` (the leader lease could no longer be proven).",
    ["reason"],
)
NOMINATED_PODS = Gauge(
    "batchsched_nominated_pods",
    "Pending pods of this scheduler holding a node their preemption freed "
    "(status.nominatedNodeName) after the last session.",
)
LEADER = Gauge(
    "batchsched_leader", "1 while this replica holds the leader lease (or runs without one)."
)
