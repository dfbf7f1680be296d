"""Token ids on text-embeddings-inference's routes: ``/decode``, and token-id arrays as ``/embed`` inputs.

TEI 1.9.3 runs an id array by decoding it to text and encoding that text again
(core/src/tokenization.rs, ``EncodingInput::Ids``), so ids are a spelling of a text. Here an array is
accepted when it is exactly that: the ids the artifact's tokenizer gives for its text, with the special
tokens it adds (what ``/tokenize`` answers by default) or without them (``add_special_tokens: false``).
The text then runs as any text does, under the record's input policy, so an accepted array gives exactly
the vector of the text it stands for. An array that is not such a spelling (an id out of the vocabulary,
ids of another tokenizer, a special token inside) is refused with 422 ``Tokenizer`` naming the array,
where TEI would embed whatever its decode-and-encode makes of it (docs/serving.md, "Differences from
text-embeddings-inference")."""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

from readout_sdk.serving.http.problems import Problem

_LOCK = threading.Lock()
_BY_ENGINE: "weakref.WeakKeyDictionary[Any, IdsText]" = weakref.WeakKeyDictionary()


class IdsText:
    """Token ids <-> text for one artifact: a copy of its tokenizer without truncation or padding."""

    def __init__(self, engine: Any):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(engine.tokenizer.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()
        self.size = self._tok.get_vocab_size(with_added_tokens=True)

    def check(self, ids: list[Any], where: str) -> list[int]:
        """``ids`` if each is an id of this vocabulary; 422 ``Tokenizer`` naming the first that is not."""
        for k, i in enumerate(ids):
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.size:
                raise Problem("tokenizer", f"{where}[{k}]: {i!r} is not a token id of this model "
                                           f"(0..{self.size - 1}); see /tokenize", f"{where}[{k}]")
        return ids

    def decode(self, ids: list[Any], where: str, skip_special_tokens: bool = True) -> str:
        """TEI's ``/decode`` of one array."""
        return self._tok.decode(self.check(ids, where), skip_special_tokens=skip_special_tokens)

    def text(self, ids: list[Any], where: str) -> str:
        """The text ``ids`` spell (with or without the special tokens the tokenizer adds); 422 otherwise."""
        if not ids:
            raise Problem("validation", f"{where}: the token-id array is empty", where)
        text = self.decode(ids, where)
        for special in (True, False):
            if self._tok.encode(text, add_special_tokens=special).ids == ids:
                return text
        raise Problem("tokenizer", f"{where}: these ids are not how this model's tokenizer spells their text "
                                   f"({text[:40]!r}); send the text, or ids as /tokenize returns them", where)


def ids_text(served: Any) -> IdsText:
    """The artifact's :class:`IdsText`, made once per engine (a copy of its tokenizer)."""
    engine = served.engine
    with _LOCK:
        found = _BY_ENGINE.get(engine)
        if found is None:
            found = _BY_ENGINE[engine] = IdsText(engine)
        return found


def ids_as_text(served: Any) -> Callable[[list[int], str], str]:
    """What ``body.texts`` calls for a token-id input of ``served``'s routes (made on first use)."""
    return lambda ids, where: ids_text(served).text(ids, where)
