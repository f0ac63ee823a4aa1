"""Listing a kind in pages, each asked for while the one before is decoded.

Pages bound the memory a large cluster costs. The next page is asked for as soon as
this one has arrived, before it is decoded (its continue token is read from the list's
own metadata alone), so the API server prepares it while this one is decoded and
applied (docs/benchmarks.md has what that saves). Pages lose their managedFields
before they are decoded, not after: a pod's managedFields take nearly as long to decode
as the rest of it.
"""

import asyncio
import json
from collections.abc import AsyncGenerator
from urllib.parse import urlencode

from batchsched.k8s.client import JSON, Api, decode
from batchsched.k8s.trim import without_managed_fields

PAGE = 1000
# A list's own metadata (resourceVersion, continue token, remaining count) fits in this.
LIST_METADATA_BYTES = 4096


def continue_token(data: bytes) -> str:
    """A page's continue token, read from the list's own metadata alone; "" when it has
    none, or when that metadata is not where the API server puts it: first for built-in
    kinds, last for custom resources (whose keys come sorted, `items` before it)."""
    key = data.find(b'"metadata":', 0, LIST_METADATA_BYTES)
    # Only kind and apiVersion, which hold no braces, come before it.
    last = key < 0 or data.count(b"{", 0, key) != 1
    if last:
        key = data.rfind(b'"metadata":', max(0, len(data) - LIST_METADATA_BYTES))
        if key < 0:
            return ""
    start = key + len(b'"metadata":')
    text = data[start : start + LIST_METADATA_BYTES].decode("utf-8", "replace")
    try:
        meta, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return ""
    if last and text[end:].strip() != "}":
        return ""  # not the list's: something follows it
    token = meta.get("continue") if isinstance(meta, dict) else None
    return token if isinstance(token, str) else ""


async def read_pages(api: Api, path: str) -> AsyncGenerator[JSON, None]:
    """Each page of the list at `path`, decoded. Close it (contextlib.aclosing) when
    leaving early, so that a page asked for ahead is not left in flight."""
    data = await _page(api, path, "")
    while True:
        token = continue_token(data)
        following = asyncio.create_task(_page(api, path, token)) if token else None
        try:
            if following is not None:
                await asyncio.sleep(0)  # lets the request go out before decoding
            page = decode(without_managed_fields(data))
            yield page
        except BaseException:
            if following is not None:
                following.cancel()
            raise
        remaining = page["metadata"].get("continue")
        if not remaining:
            return
        data = await (following or _page(api, path, remaining))


async def _page(api: Api, path: str, token: str) -> bytes:
    query = {"limit": PAGE, **({"continue": token} if token else {})}
    return await api.get_raw(f"{path}?{urlencode(query)}")
