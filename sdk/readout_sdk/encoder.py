"""The artifact's tokenizer, applied as the record says: texts and pairs in, encodings out.

Truncation comes from the record; padding never (callers pad, see `readout_sdk.batching`). The
zero-row policy is checked here, before anything runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from tokenizers import Encoding, Tokenizer

from readout_sdk.errors import InputRefused


class TextEncoder:
    """Encodes texts and pairs as the record says; checks the zero-row policy before anything runs."""

    def __init__(self, record: dict[str, Any], tokenizer_path: Path):
        self.record = record
        inp = record["input"]
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.pad_id = int(inp["pad_token_id"])
        self.max_length = int(inp["max_length"])
        self.rows = record["readout"]["rows"]
        self.inserted = set(record["readout"]["content_excluded_ids"])
        self.inputs = [i["name"] for i in record["inputs"]]

    def windowed(self, stride: int) -> Tokenizer:
        """A second tokenizer instance that returns overlapping windows (never mutate the shared one)."""
        tok = Tokenizer.from_str(self.tokenizer.to_str())
        trunc = self.tokenizer.truncation or {}
        tok.enable_truncation(self.max_length, stride=stride, strategy=trunc.get("strategy", "longest_first"),
                              direction=trunc.get("direction", "right"))
        return tok

    def content_rows(self, enc: Encoding) -> int:
        """Rows the tokenizer did not insert (text content)."""
        return sum(1 for i in enc.ids if i not in self.inserted)

    def check(self, index: int, enc: Encoding, what: str = "text") -> None:
        """Refuse an item whose readout would select zero rows (the record's zero-row policy)."""
        if self.content_rows(enc) == 0:
            raise InputRefused(f"item {index}: the {what} has no content tokens (empty or whitespace only); "
                               "this artifact refuses inputs whose readout selects zero rows")

    def encode(self, index: int, item: Any, tokenizer: Tokenizer | None = None) -> Encoding:
        """Encode a text or a (first, second) pair, type-checked."""
        return self.encode_batch(index, [item], tokenizer)[0]

    def encode_batch(self, base: int, items: Sequence[Any], tokenizer: Tokenizer | None = None) -> list[Encoding]:
        """Type-check, then encode all items in one Rust call (parallel, outside the GIL)."""
        inputs: list[Any] = []
        for j, item in enumerate(items):
            if isinstance(item, str):
                inputs.append(item)
            elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
                inputs.append((item[0], item[1]))
            else:
                raise TypeError(f"item {base + j}: expected str or a (str, str) pair, got {type(item).__name__}")
        return (tokenizer or self.tokenizer).encode_batch(inputs) if inputs else []
