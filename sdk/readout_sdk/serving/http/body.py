"""A request body read within its size bound and parsed as JSON; fields taken with their JSON paths.

Every refusal names the JSON path at fault (``$.input[3]``), so a client with a list of thousands of
inputs knows which one. Unknown fields are ignored, as OpenAI's and text-embeddings-inference's
servers do (clients add their own, e.g. ``user``)."""
from __future__ import annotations

import json
from typing import Any, Callable

from readout_sdk.serving.http.problems import Problem

NO_DEFAULT = object()
MAX_DEPTH = 32  # the deepest any route reads is 4 (an object of lists of objects); 32 leaves clients room


def _deeper_than(doc: Any, limit: int) -> bool:
    """Whether ``doc`` nests more than ``limit`` levels of lists and objects (iterative: no recursion to exhaust)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


async def read_json(request: Any, max_bytes: int) -> dict[str, Any]:
    """The body as a JSON object; 413 past ``max_bytes`` (checked on Content-Length first, then while
    reading, so a client lying about its length cannot make the server buffer more)."""
    declared = request.headers.get("content-length")
    too_large = Problem("too_large", f"the request body is over {max_bytes} bytes (--max-body-bytes)")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise Problem("malformed", "the request has no body: send a JSON object")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise Problem("malformed", f"the body is not JSON ({str(e).splitlines()[0]})") from None
    except RecursionError:  # nested past the interpreter's limit: bad input, never a 500
        doc, too_deep = None, True
    else:
        too_deep = _deeper_than(doc, MAX_DEPTH)
    if too_deep:
        raise Problem("malformed", f"the body nests deeper than {MAX_DEPTH} levels; no route reads that deep")
    if not isinstance(doc, dict):
        raise Problem("malformed", f"$: expected a JSON object, got {_kind(doc)}", "$")
    # huggingface_hub's InferenceClient nests options under "parameters" (the Inference API's shape)
    params = doc.get("parameters")
    if isinstance(params, dict):
        doc = {**{k: v for k, v in params.items() if v is not None}, **{k: v for k, v in doc.items() if k != "parameters"}}
    return doc


def field(doc: dict[str, Any], name: str, check: Callable[[Any], bool], expected: str,
          default: Any = NO_DEFAULT) -> Any:
    """``doc[name]`` if ``check`` accepts it; absent or null: ``default`` (required when there is none)."""
    value = doc.get(name)
    if value is None:
        if default is NO_DEFAULT:
            raise Problem("malformed", f"$.{name}: missing (expected {expected})", f"$.{name}")
        return default
    if not check(value):
        raise Problem("malformed", f"$.{name}: expected {expected}, got {_kind(value)}", f"$.{name}")
    return value


def boolean(doc: dict[str, Any], name: str, default: bool | None) -> bool | None:
    return field(doc, name, lambda v: isinstance(v, bool), "true or false", default)


def integer(doc: dict[str, Any], name: str, default: int | None, minimum: int = 1) -> int | None:
    return field(doc, name, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                 f"an integer >= {minimum}", default)


def string(doc: dict[str, Any], name: str, default: str | None = None) -> str | None:
    return field(doc, name, lambda v: isinstance(v, str), "a string", default)


def texts(doc: dict[str, Any], name: str,
          ids: Callable[[list[int], str], str] | None = None) -> tuple[list[str], bool]:
    """A string or a non-empty list of strings: (the strings, whether one input was sent). With ``ids``
    (text-embeddings-inference's ``Input``), a token-id array stands for one input too, alone or in the
    list: ``ids(array, its JSON path)`` gives its text (`tei_ids`). An empty list is 400 ``Empty`` (TEI's)."""
    value = field(doc, name, lambda v: isinstance(v, (str, list)),
                  "a string or a list of strings" + (" or token-id arrays" if ids else ""))
    if isinstance(value, str):
        return [value], True
    if not value:
        raise Problem("empty", f"$.{name}: the list is empty", f"$.{name}")
    if ids is not None and all(_is_id(v) for v in value):  # one token-id array
        return [ids(value, f"$.{name}")], True
    out = []
    for i, v in enumerate(value):
        if isinstance(v, str):
            out.append(v)
        elif ids is not None and isinstance(v, list) and all(_is_id(t) for t in v):
            out.append(ids(v, f"$.{name}[{i}]"))
        else:
            expected = "a string or a token-id array" if ids else "a string"
            raise Problem("malformed", f"$.{name}[{i}]: expected {expected}, got {_kind(v)}", f"$.{name}[{i}]")
    return out, False


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


kind = _kind
