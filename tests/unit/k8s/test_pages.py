"""Reading a page's continue token before the page is decoded."""

import json
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.k8s.pages import LIST_METADATA_BYTES, continue_token


def page(metadata: object, items: int = 3) -> bytes:
    body = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": metadata,
        "items": [{"metadata": {"name": f"p{i}", "continue": "not this"}} for i in range(items)],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def test_the_token_comes_from_the_list_metadata() -> None:
    token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ"
    assert continue_token(page({"resourceVersion": "9", "continue": token})) == token
    remaining = {"resourceVersion": "9", "continue": token, "remainingItemCount": 4000}
    assert continue_token(page(remaining)) == token


def test_a_custom_resource_list_has_its_metadata_last() -> None:
    body: dict[str, Any] = {
        "apiVersion": OUR_API,
        "items": [{"metadata": {"name": f"g{i}"}, "spec": {"minMember": 2}} for i in range(50)],
        "kind": "PodGroupList",
        "metadata": {"continue": "next", "resourceVersion": "9"},
    }
    assert continue_token(json.dumps(body, separators=(",", ":")).encode()) == "next"
    del body["metadata"]["continue"]
    assert continue_token(json.dumps(body, separators=(",", ":")).encode()) == ""


def test_a_last_page_has_no_token() -> None:
    assert continue_token(page({"resourceVersion": "9"})) == ""
    assert continue_token(page({"resourceVersion": "9", "continue": ""})) == ""


def test_anything_unexpected_means_no_token_yet() -> None:
    # The caller then asks for the next page once this one is decoded.
    far = b'{"kind":"PodList","padding":"' + b"x" * LIST_METADATA_BYTES + b'",' + page({})[1:]
    for data in (b"", b"not json", page(["a list"]), page({"continue": 7}), far):
        assert continue_token(data) == ""
