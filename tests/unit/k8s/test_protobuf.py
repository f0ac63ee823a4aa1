"""The protobuf encoding of a Binding, read back field by field with a wire-format reader
written from the protobuf specification (the API server accepting it is an integration
test: tests/integration/test_binding.py)."""

import pytest

from batchsched.k8s.protobuf import MAGIC, encode

Fields = list[tuple[int, bytes]]


def read(data: bytes) -> Fields:
    """(field number, payload) of each length-delimited field, in order."""
    fields: Fields = []
    pos = 0
    while pos < len(data):
        tag, pos = varint(data, pos)
        assert tag & 7 == 2, f"wire type {tag & 7} at {pos}"
        size, pos = varint(data, pos)
        fields.append((tag >> 3, data[pos : pos + size]))
        pos += size
    assert pos == len(data)
    return fields


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def payloads(data: bytes, *numbers: int) -> list[bytes]:
    """The payloads of a message holding exactly these fields, in this order."""
    fields = read(data)
    assert [number for number, _ in fields] == list(numbers)
    return [payload for _, payload in fields]


def binding(**metadata: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p0", "namespace": "team", "uid": "1234", **metadata},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n" * 200},
    }


def test_a_binding_is_an_envelope_naming_its_kind_around_the_binding() -> None:
    data = encode(binding())
    assert data.startswith(MAGIC)
    type_meta, raw = payloads(data[len(MAGIC) :], 1, 2)
    assert read(type_meta) == [(1, b"v1"), (2, b"Binding")]
    metadata, target = payloads(raw, 1, 2)
    assert read(metadata) == [(1, b"p0"), (3, b"team"), (5, b"1234")]
    # A 200-byte name takes a two-byte length.
    assert read(target) == [(5, b"v1"), (1, b"Node"), (3, b"n" * 200)]


def test_annotations_are_map_entries_of_key_and_value() -> None:
    data = encode(binding(annotations={"a/b": "0,3", "c": "é"}))
    _, raw = payloads(data[len(MAGIC) :], 1, 2)
    metadata, _ = payloads(raw, 1, 2)
    entries = [payload for number, payload in read(metadata) if number == 12]
    assert [read(e) for e in entries] == [
        [(1, b"a/b"), (2, b"0,3")],
        [(1, b"c"), (2, "é".encode())],
    ]


def test_a_field_it_cannot_encode_is_an_error_not_an_omission() -> None:
    with pytest.raises(ValueError, match="'ownerReferences'"):
        encode(binding(ownerReferences=[]))
    with pytest.raises(ValueError, match="v1 Pod"):
        encode({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
