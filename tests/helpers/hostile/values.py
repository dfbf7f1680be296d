"""Hostile values shared by every generator (numbers, strings, containers no JSON schema expects), and
helpers to walk, read and edit a JSON document by path (the generators mutate manifests and readout.json
with them)."""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence


NAN, INF = float("nan"), float("inf")
HUGE_INT = 10 ** 400  # parses as a Python int; a JSON number no C integer holds
NUMBERS = [0, -1, 1, 2, 3, 2 ** 31, 2 ** 63, 10 ** 12, 10 ** 15, HUGE_INT, 1e308, -1e308, 0.5, 1.5, -0.0, 1e-320,
           8.0, NAN, INF, -INF]
STRINGS = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "x" * 300, "x/" * 2500, "../" * 50, "/", "/etc", ".",
           "..", "NaN", "\u2603\u2603", "\u202eevil", "a\nb", "~", "accuracy>=0.5", "$ref"]
CONTAINERS = [None, True, False, [], {}, [1, 2], {"a": 1}, [[[]]], ["a", None], {"": {"": {}}}]
HOSTILE_VALUES = NUMBERS + STRINGS + CONTAINERS
UNKNOWN_KEYS = ["colour", "", "\x00", "\ud800", "x" * 300, "__proto__", "$ref", "NaN", "max", "min"]
DEEP = 2000  # nesting depth of the "deeply nested" JSON cases


def deep_json(depth: int = DEEP, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite(v: Any) -> bool:
    return is_number(v) and (isinstance(v, int) or math.isfinite(v))


def integral(v: Any) -> bool:
    return finite(v) and (isinstance(v, int) or v.is_integer())


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if is_number(v):
        return "number"
    return type(v).__name__


def walk(doc: Any, path: tuple = ()) -> Iterable[tuple[tuple, Any]]:
    """Every (path, value) of a JSON document, the root included."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from walk(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk(v, path + (i,))


def jpath(path: Sequence) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def general(path: Sequence) -> str:
    return "$" + "".join("[*]" if isinstance(p, int) else f".{p}" for p in path)


def get_at(doc: Any, path: Sequence) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def set_at(doc: Any, path: Sequence, value: Any) -> None:
    get_at(doc, path[:-1])[path[-1]] = value


def del_at(doc: Any, path: Sequence) -> None:
    del get_at(doc, path[:-1])[path[-1]]


class Raw:
    """A JSON document with raw text spliced in where json.dumps cannot write it (2000-deep nesting
    beyond its recursion limit, a 1e400 literal, duplicate keys); NaN and Infinity it writes itself."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}

    def marker(self, text: str) -> str:
        key = f"@@RAW{len(self.parts)}@@"
        self.parts[key] = text
        return key

    def dumps(self, doc: Any) -> bytes:
        text = json.dumps(doc, indent=1)  # ensure_ascii: NUL and lone surrogates become \u escapes
        for key, raw in self.parts.items():
            text = text.replace(json.dumps(key), raw)
        return text.encode("utf-8")
