"""The SDK's one set of argument checks: what a call accepts, refused with the argument and item named.

Wrong types raise `readout_sdk.errors.WrongCall` (a `TypeError`), wrong values `BadArgument` (a
`ValueError`), inputs the artifact cannot answer `InputRefused` (a `ValueError`); all are `SdkError`s. Nothing here imports a runtime.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Set
from typing import Any, Iterable, Sequence

from readout_sdk.errors import BadArgument, InputRefused, WrongCall

_SURROGATE = re.compile("[\ud800-\udfff]")


def positive_int(name: str, value: Any) -> int:
    """An ``int`` of at least 1 (``True`` is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongCall(f"{name} must be a positive integer, got {type(value).__name__} {value!r}")
    if value < 1:
        raise BadArgument(f"{name} must be a positive integer, got {value!r}")
    return value


def optional_positive_int(name: str, value: Any) -> int | None:
    """None, or :func:`positive_int`."""
    return None if value is None else positive_int(name, value)


def flag(name: str, value: Any) -> bool | None:
    """None or a bool (a string like "false" is not a flag)."""
    if value is not None and not isinstance(value, bool):
        raise WrongCall(f"{name} must be True, False or None, got {type(value).__name__} {value!r}")
    return value


def one_of(name: str, value: Any, allowed: Sequence[str]) -> str:
    """One of ``allowed``, else a refusal listing them (and the closest, where one is close)."""
    if not isinstance(value, str) or value not in allowed:
        near = difflib.get_close_matches(value, allowed, 1) if isinstance(value, str) else []
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise BadArgument(f"{name} must be one of {list(allowed)}, got {value!r}{hint}")
    return value


def text(index: int, role: str, value: Any) -> str:
    """One input string: a ``str`` that is valid Unicode (a lone surrogate cannot be encoded to UTF-8,
    so no tokenizer can read it)."""
    if not isinstance(value, str):
        raise WrongCall(f"item {index}: the {role} must be str, got {type(value).__name__}")
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise InputRefused(f"item {index}: the {role} holds a lone surrogate ({bad.group()!r} at character "
                           f"{bad.start()}), which is not valid Unicode text")
    return value


def items(values: Any, what: str = "texts") -> Iterable[Any]:
    """A list, tuple or other ordered iterable of items (consumed lazily). A bare str or bytes, a mapping
    (its keys are not inputs) and a set (it has no order for results to follow) are refused."""
    if isinstance(values, (str, bytes, bytearray)):
        raise WrongCall(f"{what}: expected a list of items, got one {type(values).__name__} (wrap it in a list)")
    if isinstance(values, (Mapping, Set)):
        raise WrongCall(f"{what}: expected a list of items, got a {type(values).__name__} (a mapping's keys or "
                        "a set's members are not an ordered list of inputs)")
    if not hasattr(values, "__iter__"):
        raise WrongCall(f"{what}: expected an iterable of items, got {type(values).__name__}")
    return values
