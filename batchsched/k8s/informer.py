"""Keeping the cache in step with the cluster: one list-then-watch stream per kind.

A kind is listed in pages (pages.py), then watched from the list's resourceVersion.
The watch resumes from the last version it saw when the server closes it or the
connection drops; a 410 Gone (the history it needs was compacted) means listing again
and removing whatever disappeared in between. A kind whose CRD is not installed is
looked for again every `absent_retry` seconds, so the foreign PodGroup kinds are
picked up once their CRDs appear; a kind with a note of its own (an API the server
may not serve) says so in one line when it is found absent, and again once it is
served. The first complete list is reported to the Watch,
which knows the cache is whole once every kind has one. Events lose their
managedFields before they are decoded, as pages do.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from urllib.parse import urlencode

from batchsched.k8s.client import JSON, TRANSPORT_ERRORS, Api, ApiError, backoff, error_code
from batchsched.k8s.pages import read_pages
from batchsched.k8s.trim import without_managed_fields
from batchsched.k8s.watch import Watch, Watched, key_of
from batchsched.metrics import API_REQUEST_RETRIES

log = logging.getLogger(__name__)

# The server ends each watch after this long; it is then resumed where it stopped.
WATCH_SECONDS = 300
# A watch of a kind nobody changes can stay silent until the server ends it, bookmarks
# or not; one silent for longer than that is presumed dead.
SILENCE_SECONDS = WATCH_SECONDS + 30


class Gone(Exception):
    """The watch's resourceVersion is too old: the kind must be listed again."""


class Informer:
    def __init__(
        self, api: Api, watched: Watched, watch: Watch, *, absent_retry: float = 30.0
    ) -> None:
        self.api = api
        self.watched = watched
        self.watch = watch
        self.absent_retry = absent_retry
        # Whether the kind was absent at the last list (None: not listed yet).
        self._absent: bool | None = None

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                version = await self._list()
                self._tell(absent=version is None)
                self.watch.listed(self.watched)
                failures = 0
                if version is None:
                    await asyncio.sleep(self.absent_retry)
                    continue
                await self._follow(version)
            except Gone:
                log.info("%s: watch history compacted, listing again", self.watched.id)
            except (ApiError, *TRANSPORT_ERRORS) as error:
                log.warning("%s: %s; retrying", self.watched.id, error or repr(error))
                API_REQUEST_RETRIES.labels(error_code(error)).inc()
                await asyncio.sleep(backoff(failures))
                failures += 1

    async def _list(self) -> str | None:
        """Apply every object, drop the ones no longer there; None if the kind is absent."""
        seen: set[str] = set()
        version = None
        try:
            async with contextlib.aclosing(read_pages(self.api, self.watched.path)) as pages:
                async for page in pages:
                    for obj in page.get("items") or []:
                        seen.add(self.watch.apply(self.watched, obj))
                    version = str(page["metadata"]["resourceVersion"])
        except ApiError as error:
            # Absent: the first page is not found. A later 404 is an error to retry.
            if error.status != 404 or version is not None:
                raise
        self._drop_all_but(seen)
        return version

    def _tell(self, *, absent: bool) -> None:
        """The kind's note once it is found absent, and a line when it is served again."""
        note = self.watched.absent_note
        if note and absent and not self._absent:
            log.warning("%s is not served: %s", self.watched.id, note)
        elif note and self._absent and not absent:
            log.info("%s is served now: watching it", self.watched.id)
        self._absent = absent

    def _drop_all_but(self, keys: set[str]) -> None:
        for key in self.watch.keys(self.watched) - keys:
            self.watch.delete(self.watched, key)

    async def _follow(self, version: str) -> None:
        """Apply watch events from `version` on, resuming after every disconnect."""
        failures = 0
        while True:
            try:
                # aclosing: leaving the loop (Gone, an error) closes the watch at once.
                async with contextlib.aclosing(self._events(version)) as events:
                    async for event in events:
                        failures = 0
                        obj = event["object"]
                        kind = event["type"]
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                raise Gone
                            raise ApiError(
                                "WATCH", self.watched.path, int(obj.get("code") or 500), obj
                            )
                        version = obj["metadata"]["resourceVersion"]
                        if kind == "DELETED":
                            self.watch.delete(self.watched, key_of(obj))
                        elif kind != "BOOKMARK":
                            self.watch.apply(self.watched, obj)
            except TRANSPORT_ERRORS as error:
                log.info("%s: watch interrupted (%r); resuming", self.watched.id, error)
                API_REQUEST_RETRIES.labels(error_code(error)).inc()
                await asyncio.sleep(backoff(failures))
                failures += 1

    async def _events(self, version: str) -> AsyncGenerator[JSON, None]:
        query = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": WATCH_SECONDS,
        }
        path = f"{self.watched.path}?{urlencode(query)}"
        async with self.api.stream(path, silence=SILENCE_SECONDS) as reply:
            async for line in reply.lines():
                if line.strip():
                    yield json.loads(without_managed_fields(line))
