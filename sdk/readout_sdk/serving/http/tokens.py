"""Token arrays in place of text (OpenAI's ``input`` may be token ids), accepted only when exact.

An array is this model's own token ids for one input's content, as ``/tokenize`` returns them with
``add_special_tokens: false``: never OpenAI's (tiktoken) ids, which mean other tokens. What is checked here
is only that the ids are this model's and exact; that cannot tell OpenAI's ids apart (cl100k's
``[15339, 1917]`` are valid ids here and re-encode exactly), so the OpenAI route takes arrays only when the
request says they are this model's own (``openai_routes``). The ids are
decoded with the artifact's tokenizer and accepted only if that text encodes back to exactly these ids;
the text then runs like any other, under the record's input policy (special tokens, role prompt,
truncation). So an accepted array gives exactly the vector of the text it stands for, and anything else
is refused naming the input."""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.problems import Problem


class TokenText:
    """Decodes token arrays for one artifact (a copy of its tokenizer without truncation, made once)."""

    def __init__(self, engine: Any):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(engine.tokenizer.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()
        self._size = self._tok.get_vocab_size(with_added_tokens=True)
        self._special = {int(i) for i in engine.abi["readout"]["content_excluded_ids"]}  # the ids it inserts

    def text(self, ids: list[Any], where: str) -> str:
        if not ids:
            raise Problem("validation", f"{where}: the token array is empty", where)
        for k, i in enumerate(ids):
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self._size:
                raise Problem("validation", f"{where}[{k}]: {i!r} is not a token id of this model (0..{self._size - 1}); "
                                            "token arrays are the model's own ids (see /tokenize), not OpenAI's", where)
            if i in self._special:
                raise Problem("validation", f"{where}[{k}]: {i} is a special token the tokenizer adds itself; send "
                                            "content ids only (/tokenize with add_special_tokens: false)", where)
        text = self._tok.decode(ids, skip_special_tokens=False)
        back = self._tok.encode(text, add_special_tokens=False).ids
        if back != ids:
            raise Problem("validation", f"{where}: these ids do not encode back from their text ({text[:40]!r}) with "
                                        "this model's tokenizer; send the text, or ids as /tokenize returns them", where)
        return text
