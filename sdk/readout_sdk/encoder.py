"""The artifact's tokenizer, applied as the record says: texts and pairs in, encodings out.

Truncation comes from the record; padding never (callers pad, see `readout_sdk.batching`). The
zero-row policy is checked here, before anything runs. A call may cut the other end (:data:`SIDE`, set by the
prepare step for the items it encodes).
"""
from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tokenizers import Encoding, Tokenizer

from readout_sdk.errors import InputRefused, WrongItem, first_line

# The side a call cuts too-long inputs from ("left" keeps the end of the text; None: the record's side). The
# prepare step sets it around one call's encoding (`Preparer.prepare`), so every input kind's encoding honours
# it without each family's encode() (a plugin contract) taking one more argument. A context variable, so
# concurrent calls on other threads keep their own side.
SIDE: ContextVar[str | None] = ContextVar("readout_truncation_side", default=None)
SIDES = ("left", "right")


class TextEncoder:
    """Encodes texts and pairs as the record says; checks the zero-row policy before anything runs."""

    def __init__(self, record: dict[str, Any], tokenizer: Path | bytes):
        """``tokenizer``: the tokenizer.json file, or its bytes as verified (`Artifact.tokenizer_bytes`): the
        tokenizer used is then exactly what was hashed, never the file read a second time."""
        self.record = record
        inp = record["input"]
        self.tokenizer = (Tokenizer.from_str(tokenizer.decode("utf-8")) if isinstance(tokenizer, bytes)
                          else Tokenizer.from_file(str(tokenizer)))
        self.pad_id = int(inp["pad_token_id"])
        self.max_length = int(inp["max_length"])
        self.rows = record["readout"]["rows"]
        self.inserted = set(record["readout"]["content_excluded_ids"])
        self._inserted = np.array(sorted(self.inserted), np.int64)
        self.inputs = [i["name"] for i in record["inputs"]]
        self._measure: Tokenizer | None = None
        self._lengths: dict[int, Tokenizer] = {}
        self._sides: dict[tuple[int, str], Tokenizer] = {}

    def at_length(self, max_length: int) -> Tokenizer:
        """A tokenizer instance truncating at ``max_length`` (a role's own length), made once per length."""
        if max_length not in self._lengths:
            tok = Tokenizer.from_str(self.tokenizer.to_str())
            trunc = self.tokenizer.truncation or {}
            tok.enable_truncation(max_length, strategy=trunc.get("strategy", "longest_first"),
                                  direction=trunc.get("direction", "right"))
            self._lengths[max_length] = tok
        return self._lengths[max_length]

    def sided(self, tok: Tokenizer) -> Tokenizer:
        """``tok`` cutting from the call's side (:data:`SIDE`): a copy made once per (length, side), or ``tok``
        itself where it already cuts there, never cuts, or windows (a window cuts nothing of its text)."""
        side, trunc = SIDE.get(), tok.truncation
        if side is None or not trunc or trunc.get("direction", "right") == side or trunc.get("stride"):
            return tok
        key = (int(trunc["max_length"]), side)
        if key not in self._sides:  # made before it is shared: another thread sees a configured copy or none
            sided = Tokenizer.from_str(tok.to_str())
            sided.enable_truncation(key[0], strategy=trunc.get("strategy", "longest_first"), direction=side)
            self._sides[key] = sided
        return self._sides[key]

    def windowed(self, stride: int) -> Tokenizer:
        """A second tokenizer instance that returns overlapping windows (never mutate the shared one)."""
        tok = Tokenizer.from_str(self.tokenizer.to_str())
        trunc = self.tokenizer.truncation or {}
        tok.enable_truncation(self.max_length, stride=stride, strategy=trunc.get("strategy", "longest_first"),
                              direction=trunc.get("direction", "right"))
        return tok

    def check(self, index: int, enc: Encoding, what: str = "text", skip: int = 0) -> None:
        """Refuse an item whose readout would select zero rows (the record's zero-row policy); the first
        ``skip`` rows are a role's prompt, not the item's text."""
        ids = enc.ids[skip:] if skip else enc.ids
        if all(map(self.inserted.__contains__, ids)):  # stops at the first content row
            raise InputRefused(f"item {index}: the {what} has no content tokens (empty or whitespace only); "
                               "this artifact refuses inputs whose readout selects zero rows")

    def without_content(self, input_ids: np.ndarray, attention_mask: np.ndarray,
                        prompt_rows: np.ndarray | None = None) -> np.ndarray:
        """Of a padded batch ([..., sequence]), which rows :meth:`check` would refuse (no attended id outside
        the inserted ones, after each item's ``prompt_rows`` leading valid rows), in one vectorized pass: the
        pipelined engine checks batches, not encodings."""
        valid = attention_mask.astype(bool)
        content = valid & ~np.isin(input_ids, self._inserted)
        if prompt_rows is not None and prompt_rows.any():  # rank among valid rows: either padding side
            content &= (np.cumsum(valid, axis=-1) > prompt_rows[..., None])
        return ~content.any(axis=-1)

    def encode(self, index: int, item: Any, tokenizer: Tokenizer | None = None) -> Encoding:
        """Encode a text or a (first, second) pair, type-checked."""
        return self.encode_batch(index, [item], tokenizer)[0]

    def encode_batch(self, base: int, items: Sequence[Any], tokenizer: Tokenizer | None = None,
                     offsets: bool = True, prompt: str = "") -> list[Encoding]:
        """Type-check, then encode all items in one Rust call (parallel, outside the GIL). The tokenizer's
        own errors and panics (a Rust panic is a BaseException) come back as an InputRefused naming the item.
        ``offsets=False``: character offsets are not computed (tokenizers' ``encode_batch_fast``: the same
        ids, types, masks and overflow, offsets left 0; about 6 % less tokenizing on MiniLM). ``prompt``: a
        role's prompt, prepended to each text before tokenizing (`readout_sdk.roles`)."""
        inputs: list[Any] = []
        for j, item in enumerate(items):
            if isinstance(item, str):
                inputs.append(prompt + item)
            elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
                inputs.append((item[0], item[1]))
            else:
                raise WrongItem(f"item {base + j}: expected str or a (str, str) pair, got {type(item).__name__}")
        if not inputs:
            return []
        tok = self.sided(tokenizer or self.tokenizer)
        self._check_window_room(base, inputs, tok)
        encode = tok.encode_batch if offsets else getattr(tok, "encode_batch_fast", tok.encode_batch)
        try:
            encoded = encode(inputs)
        except BaseException as e:
            if not _native(e):
                raise
        else:
            return self._prompt_kept(base, encoded, prompt, tok)
        for j, one in enumerate(inputs):  # find the item, outside the failed batch call
            try:
                tok.encode(*one) if isinstance(one, tuple) else tok.encode(one)
            except BaseException as e:
                if not _native(e):
                    raise
                raise InputRefused(f"item {base + j}: the tokenizer cannot encode it ({first_line(e)})") from None
        raise InputRefused(f"items {base}..{base + len(inputs) - 1}: the tokenizer failed on the batch")

    @staticmethod
    def _prompt_kept(base: int, encoded: list[Encoding], prompt: str, tok: Tokenizer) -> list[Encoding]:
        """``encoded``, unless a text cut from the left lost the role's prompt it starts with (its rows would be
        read as the prompt's): refused by item."""
        if prompt and SIDE.get() == "left" and (tok.truncation or {}).get("direction") == "left":
            for j, enc in enumerate(encoded):
                if enc.overflowing:
                    raise InputRefused(f"item {base + j}: too long to cut from the left under a role with a prompt "
                                       "(the cut would remove the prompt); send it shorter, or cut it from the right")
        return encoded

    def _check_window_room(self, base: int, inputs: list[Any], tok: Tokenizer) -> None:
        """Windowing a pair keeps its first text whole in every window: the first text must leave more than
        the stride for the second, or no window can advance (tokenizers panics on it)."""
        trunc = tok.truncation or {}
        if not trunc.get("stride") or trunc.get("strategy") != "only_second" or not isinstance(inputs[0], tuple):
            return
        specials = tok.num_special_tokens_to_add(True)
        limit = self.max_length - specials - int(trunc["stride"]) - 1
        if self._measure is None:  # the same tokenizer, uncut: the shared one may refuse a lone text outright
            measure = Tokenizer.from_str(self.tokenizer.to_str())
            measure.no_truncation()  # configured before any other prepare thread can see it
            self._measure = measure
        firsts = [len(e.ids) for e in self._measure.encode_batch([a for a, _ in inputs], add_special_tokens=False)]
        for j, first in enumerate(firsts):  # questions are short: only a long one has its context measured
            if first > limit and first + len(self._measure.encode(inputs[j][1], add_special_tokens=False).ids) \
                    + specials > self.max_length:
                raise InputRefused(f"item {base + j}: the question is {first} tokens; with this artifact's "
                                   f"max_length {self.max_length} and window stride {trunc['stride']} a question "
                                   f"may have at most {limit} tokens beside a context that needs windows")


def _native(e: BaseException) -> bool:
    """An error raised by the tokenizer library: its exceptions, or a Rust panic (pyo3's PanicException
    derives from BaseException, so ``except Exception`` would let it through)."""
    return isinstance(e, Exception) or type(e).__name__ == "PanicException"

