"""Token arrays in place of text, accepted only when exact: the one definition every route uses.

An array is accepted when it is exactly how the artifact's tokenizer spells a text; that text then runs like
any other, under the record's input policy (special tokens, role prompt, truncation), so an accepted array
gives exactly the vector of the text it stands for, and anything else is refused naming the input. Two
readings of "spells", one per dialect:

- text-embeddings-inference's routes (``/embed`` ...; ``specials=True``): with or without the special tokens
  the tokenizer adds (what ``/tokenize`` answers with ``add_special_tokens`` true or false). TEI 1.9.3 itself
  decodes ids to text and encodes that again (core/src/tokenization.rs, ``EncodingInput::Ids``), so ids are a
  spelling of a text; a refusal is 422 ``Tokenizer``.
- OpenAI's ``input`` (``specials=False``): content ids only, as ``/tokenize`` returns them with
  ``add_special_tokens: false``. OpenAI's clients send tiktoken ids unasked, and no check of the ids can tell
  them apart (cl100k's ``[15339, 1917]`` are valid ids here and re-encode exactly), so the OpenAI route takes
  arrays only when the request says they are this model's own (``openai_routes``); a refusal is 400.
"""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.problems import Problem


class TokenText:
    """Token ids <-> text for one artifact: a copy of its tokenizer without truncation or padding, made once."""

    def __init__(self, engine: Any):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(engine.tokenizer.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()
        self.size = self._tok.get_vocab_size(with_added_tokens=True)
        self._special = {int(i) for i in engine.abi["readout"]["content_excluded_ids"]}  # the ids it inserts

    def check(self, ids: list[Any], where: str, kind: str = "tokenizer", param: str | None = None) -> list[int]:
        """``ids`` if each is an id of this vocabulary; a ``kind`` refusal naming the first that is not
        (``param``: the JSON path the refusal names, default the id's own)."""
        for k, i in enumerate(ids):
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.size:
                raise Problem(kind, f"{where}[{k}]: {i!r} is not a token id of this model (0..{self.size - 1}); "
                                    "token arrays are the model's own ids (see /tokenize)", param or f"{where}[{k}]")
        return ids

    def decode(self, ids: list[Any], where: str, skip_special_tokens: bool = True) -> str:
        """TEI's ``/decode`` of one array."""
        return self._tok.decode(self.check(ids, where), skip_special_tokens=skip_special_tokens)

    def text(self, ids: list[Any], where: str, specials: bool = True) -> str:
        """The text ``ids`` spell (``specials``: with or without the tokenizer's special tokens; else content
        ids only); refused naming ``where`` otherwise (422 ``Tokenizer``; OpenAI's reading: 400)."""
        kind = "tokenizer" if specials else "validation"
        if not ids:
            raise Problem("validation", f"{where}: the token-id array is empty", where)
        self.check(ids, where, kind, None if specials else where)
        if not specials:
            for k, i in enumerate(ids):
                if i in self._special:
                    raise Problem(kind, f"{where}[{k}]: {i} is a special token the tokenizer adds itself; send "
                                        "content ids only (/tokenize with add_special_tokens: false)", where)
        text = self._tok.decode(ids, skip_special_tokens=specials)
        for added in ((True, False) if specials else (False,)):
            if self._tok.encode(text, add_special_tokens=added).ids == ids:
                return text
        raise Problem(kind, f"{where}: these ids do not encode back from their text ({text[:40]!r}) with this "
                            "model's tokenizer; send the text, or ids as /tokenize returns them", where)
