"""The one JSONL reader: parity corpora, evaluation data and encode inputs name each problem's line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def objects(path: str | Path, error: type[Exception] = ValueError,
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
        try:
            obj = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{n}: not JSON ({e.msg})") from None
        except RecursionError:
            raise error(f"{path}:{n}: nested too deeply") from None
        except ValueError as e:
            raise error(f"{path}:{n}: {e}") from None
        if not isinstance(obj, dict):
            raise error(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
