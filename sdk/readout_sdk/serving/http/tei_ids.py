"""Token-id arrays as text-embeddings-inference's ``inputs`` (``/embed`` ...), read off the event loop; the
spelling rule (an array is accepted when it is exactly how the tokenizer spells a text, with or without its
special tokens) is `tokens.TokenText`'s, shared with the OpenAI route and ``/decode``."""
from __future__ import annotations

from typing import Any, Callable

from readout_sdk.serving.http.problems import Problem
from readout_sdk.serving.http.tokens import TokenText


def ids_text(served: Any) -> TokenText:
    """The artifact's :class:`TokenText` (``Served.token_text``: made once per model)."""
    return served.token_text


async def inputs_of(served: Any, doc: dict[str, Any]) -> list[str]:
    """``doc["inputs"]`` as texts (`body.texts`), token-id arrays spelt back to their text on the model's
    tokenization workers: decoding and re-encoding a long array takes seconds, which must never hold the
    event loop (every other request and /health wait on it)."""
    from readout_sdk.serving.http import body as B

    spell = ids_as_text(served)  # called only for an id array: plain texts are read here, at once
    if not _has_ids(doc.get("inputs")):
        return B.texts(doc, "inputs", spell)[0]
    named = "prompt_name" if doc.get("prompt_name") is not None else "role" if doc.get("role") is not None else None
    if named is not None:  # /tokenize's ids under a role already hold its prompt: run again, it would be doubled
        raise Problem("tokenizer", f"$.{named}: token-id arrays cannot be combined with a role (ids from /tokenize "
                                   f"with {named} already hold its prompt); send the text with {named}, or the ids "
                                   "alone", f"$.{named}")
    return (await served.off_loop(lambda: B.texts(doc, "inputs", spell)))[0]


def _has_ids(value: Any) -> bool:
    """Whether an ``inputs`` value holds a token-id array (a list whose first item is an int, or a list of them)."""
    if not isinstance(value, list) or not value:
        return False
    return any(isinstance(v, int) or (isinstance(v, list) and any(isinstance(i, int) for i in v)) for v in value)


def ids_as_text(served: Any) -> Callable[[list[int], str], str]:
    """What ``body.texts`` calls for a token-id input of ``served``'s routes (made on first use)."""
    return lambda ids, where: ids_text(served).text(ids, where, specials=True)
