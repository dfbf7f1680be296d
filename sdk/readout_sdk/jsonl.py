"""The one JSONL reader: parity corpora, evaluation data and encode inputs name each problem's line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

from readout_sdk.errors import InputRefused


def loads(data: bytes | str, fail: Callable[[str], Exception]) -> Any:
    """Strict JSON: UTF-8, no NaN or Infinity, bounded nesting. What is wrong goes to ``fail`` (a short
    description such as "not UTF-8 text (byte 3)"; the caller adds where), whose error is raised."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise fail(f"not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise fail("nested too deeply") from None
    except json.JSONDecodeError as e:
        raise fail(f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except ValueError as e:  # NaN, Infinity
        raise fail(f"not valid JSON ({e})") from None


def objects(path: str | Path, error: type[Exception] = InputRefused,
            raw: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a UTF-8 JSONL file. Lines end at "\\n" only, so
    U+2028 and the like may sit raw inside JSON strings; anything but a JSON object raises ``error``
    naming the file and line. ``raw``: the file's bytes when the caller has read them already (to hash)."""
    raw = Path(path).read_bytes() if raw is None else raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start})") from None
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        obj = loads(line, lambda why, n=n: error(f"{path}:{n}: {why}"))
        if not isinstance(obj, dict):
            raise error(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def _no_constant(name: str) -> Any:
    # caught by `loads` (a ValueError), which hands the reason to its caller's ``fail``
    raise InputRefused(f"{name}: not a finite number")
