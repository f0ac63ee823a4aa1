"""The one rewrite DRA's environment needs of a selector's text before the engine compiles it.

In DRA, `device.attributes[d]` and `device.capacity[d]` are maps whose lookup of a domain the
device lacks yields an empty map, while `d in device.attributes` stays false (cel/compile.go,
`newStringInterfaceMapWithDefault`). The engine's maps cannot do that, so each such lookup is
rewritten into `cel.bind(k, d, dyn(k in M ? M[k] : {}))` before compiling, and a presence test
of a domain, which that map always passes, into `true`. The rewrite works on tokens: string
literals and comments are never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
        |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_MAPS = ("attributes", "capacity")
_KEY = "__dra_domain"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    # The text with the spaces and comments before it, so that joining gives the source back.
    raw: str


def default_domains(source: str) -> str:
    """The selector with every domain lookup on `device.attributes`/`device.capacity` defaulted."""
    tokens: list[_Token] = []
    start = 0
    for match in _TOKEN.finditer(source):
        if match.lastgroup != "space":
            tokens.append(
                _Token(match.lastgroup or "other", match.group(), source[start : match.end()])
            )
            start = match.end()
    if not any(t.text in _MAPS for t in tokens):
        return source
    return _rewrite(tokens) + source[start:]


def _rewrite(tokens: list[_Token]) -> str:
    out: list[str] = []
    index = 0
    while index < len(tokens):
        if _domain_presence(tokens, index):
            out.append(tokens[index].raw.removesuffix("has") + "true")
            index += 8
            continue
        target = _map_at(tokens, index)
        if target is None:
            out.append(tokens[index].raw)
            index += 1
            continue
        whole = f"device.{target}"
        out.append(tokens[index].raw.removesuffix("device"))
        after = index + 3
        # `M[?d]` asks for an optional: left to the engine.
        if after + 1 < len(tokens) and tokens[after].text == "[" and tokens[after + 1].text != "?":
            close = _closing(tokens, after)
            if close is not None:
                key = _rewrite(tokens[after + 1 : close])
                out.append(_defaulted(whole, key.strip()))
                index = close + 1
                continue
        elif (
            after + 1 < len(tokens)
            and tokens[after].text == "."
            and tokens[after + 1].kind == "ident"
            and not _is_call(tokens, after + 2)
        ):
            out.append(_defaulted(whole, f'"{tokens[after + 1].text}"'))
            index = after + 2
            continue
        out.append(whole)
        index = after
    return "".join(out)


def _defaulted(whole: str, key: str) -> str:
    # dyn(): the engine's checker types the conditional too narrowly for macros over it.
    return f"cel.bind({_KEY}, {key}, dyn({_KEY} in {whole} ? {whole}[{_KEY}] : {{}}))"


def _map_at(tokens: list[_Token], index: int) -> str | None:
    """`attributes` or `capacity` if tokens[index:] start with `device.attributes`/`capacity`."""
    if index + 2 >= len(tokens) or tokens[index].text != "device":
        return None
    if index > 0 and tokens[index - 1].text == ".":
        return None
    if tokens[index + 1].text != "." or tokens[index + 2].text not in _MAPS:
        return None
    return tokens[index + 2].text


def _is_call(tokens: list[_Token], index: int) -> bool:
    """`device.attributes.exists(...)` is a macro on the map, not a domain."""
    return index < len(tokens) and tokens[index].text == "("


def _closing(tokens: list[_Token], opening: int) -> int | None:
    depth = 0
    for index in range(opening, len(tokens)):
        text = tokens[index].text
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
            if depth == 0:
                return index if text == "]" else None
    return None


def _domain_presence(tokens: list[_Token], index: int) -> bool:
    """`has(device.attributes.d)`: true for every `d` in DRA, whose map finds every domain.

    cel-go's presence test asks the map's Find (interpreter/attributes.go, refQualify), which
    DRA's map answers for any domain with the empty map.
    """
    return (
        index + 7 < len(tokens)
        and tokens[index].text == "has"
        and (index == 0 or tokens[index - 1].text != ".")
        and tokens[index + 1].text == "("
        and _map_at(tokens, index + 2) is not None
        and tokens[index + 5].text == "."
        and tokens[index + 6].kind == "ident"
        and tokens[index + 7].text == ")"
    )
