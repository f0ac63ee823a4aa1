"""Listing in pages: the page size, and a page's continue token read before the page is
decoded, so that the next page can be asked for while this one is (informer.py)."""

import json

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
