"""Request bodies in the API server's protobuf encoding, for the one request the scheduler
sends by the thousand: the Binding.

The API server reads a JSON body twice, once to find its kind and once to decode it
(strictly, to warn of unknown fields); a protobuf body names its kind in a small header
and decodes in one pass. kube-scheduler binds the same way (client-go sends built-in
kinds as protobuf), and the API server spends less CPU per bind on it
(docs/benchmarks.md).
Responses stay JSON: they are small, and errors must be readable.

A body is encoded from the same manifest that would be sent as JSON, through a table of
the fields a Binding can hold, so the two cannot drift apart; a field missing from the
table is an error rather than something silently left out.
"""

from collections.abc import Mapping
from typing import Any

PROTOBUF = "application/vnd.kubernetes.protobuf"
# What starts every protobuf body: "k8s" and a zero byte, then a runtime.Unknown.
MAGIC = b"k8s\x00"
STRING = "string"
STRING_MAP = "map<string,string>"
# Field name -> (field number, STRING, STRING_MAP or a nested message).
Message = Mapping[str, tuple[int, "str | Message"]]

# Field numbers from the API's generated.proto files (k8s.io/apimachinery and k8s.io/api).
TYPE_META: Message = {"apiVersion": (1, STRING), "kind": (2, STRING)}
OBJECT_META: Message = {
    "name": (1, STRING),
    "namespace": (3, STRING),
    "uid": (5, STRING),
    "labels": (11, STRING_MAP),
    "annotations": (12, STRING_MAP),
}
OBJECT_REFERENCE: Message = {
    "kind": (1, STRING),
    "namespace": (2, STRING),
    "name": (3, STRING),
    "uid": (4, STRING),
    "apiVersion": (5, STRING),
}
KINDS: Mapping[tuple[str, str], Message] = {
    ("v1", "Binding"): {"metadata": (1, OBJECT_META), "target": (2, OBJECT_REFERENCE)},
}


def encode(manifest: Mapping[str, Any]) -> bytes:
    """The manifest as a protobuf body; raises ValueError for a kind or field not known here."""
    type_meta = {key: manifest.get(key) for key in TYPE_META}
    schema = KINDS.get((str(type_meta["apiVersion"]), str(type_meta["kind"])))
    if schema is None:
        raise ValueError(f"no protobuf encoding for {type_meta['apiVersion']} {type_meta['kind']}")
    fields = {key: value for key, value in manifest.items() if key not in TYPE_META}
    envelope = _field(1, _message(type_meta, TYPE_META)) + _field(2, _message(fields, schema))
    return MAGIC + envelope


def _message(values: Mapping[str, Any], schema: Message) -> bytes:
    out: list[bytes] = []
    for name, value in values.items():
        if name not in schema:
            raise ValueError(f"no protobuf field for {name!r} (known: {', '.join(schema)})")
        number, kind = schema[name]
        if not isinstance(kind, str):
            out.append(_field(number, _message(value, kind)))
        elif kind == STRING_MAP:
            for key, item in value.items():
                entry = _field(1, str(key).encode()) + _field(2, str(item).encode())
                out.append(_field(number, entry))
        else:
            out.append(_field(number, str(value).encode()))
    return b"".join(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings, map entries and messages alike."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# bytes((n,)) for each one-byte varint, made once: the binder encodes a body per pod.
_BYTES = [bytes((n,)) for n in range(0x80)]


def _varint(value: int) -> bytes:
    if value < 0x80:  # every tag here, and most lengths: one byte
        return _BYTES[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
