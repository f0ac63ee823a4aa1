"""What to explain: `pod/NAME`, `pg/NAME` or `queue/NAME`, as kubectl names objects."""

from dataclasses import dataclass

from batchsched.api.errors import InvalidObject

# kubectl's spellings of each kind (singular, plural, short name).
KINDS = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "pg": "pg",
    "podgroup": "pg",
    "podgroups": "pg",
    "queue": "queue",
    "queues": "queue",
    "q": "queue",
}


@dataclass(frozen=True, kw_only=True)
class Target:
    kind: str  # "pod", "pg" or "queue"
    namespace: str  # "" for queues, which are cluster-scoped
    name: str

    @property
    def key(self) -> str:
        return self.name if self.kind == "queue" else f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


def parse_target(raw: str, *, namespace: str) -> Target:
    kind, slash, name = raw.partition("/")
    if not slash or not name or kind.lower() not in KINDS:
        raise InvalidObject(f"{raw!r}: name what to explain as pod/NAME, pg/NAME or queue/NAME")
    found = KINDS[kind.lower()]
    return Target(kind=found, namespace="" if found == "queue" else namespace, name=name)
