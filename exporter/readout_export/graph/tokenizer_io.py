"""Prepare the artifact's tokenizer: a `tokenizers` JSON file whose truncation matches the record.

Padding is switched off in the file: the runtime pads to the side it chooses, and the record says
which sides are supported. Source tokenizer files sometimes carry stale fixed padding/truncation
(all-MiniLM-L6-v2 pads and truncates at 128 while its model card says 256); the record is the truth.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_export.errors import ManifestError

SPECIAL_NAMES = ("cls", "sep", "pad", "bos", "eos", "unk", "mask")


@dataclass
class TokenizerInfo:
    """What the record needs to know about the tokenizer."""

    backend: Any  # tokenizers.Tokenizer
    special_ids: dict[str, int]
    all_special_ids: list[int]
    inserted_ids: list[int]  # ids the tokenizer inserts itself ([CLS], [SEP], <s>, </s>, ...) plus pad
    pad_id: int
    leading_special: bool  # a special token is placed before the text (e.g. [CLS], <s>)
    source_file: Path | None


def load_tokenizer(tok_dir: Path, max_length: int, side: str, strategy: str) -> TokenizerInfo:
    """Load the source tokenizer (converted to `tokenizers` form if needed) and set truncation."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True, use_fast=True)
    except Exception as e:  # transformers raises many kinds here; the message is what matters
        raise ManifestError("$.model", f"cannot load the tokenizer in {tok_dir}: {str(e).splitlines()[0]}") from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ManifestError("$.model", f"the tokenizer in {tok_dir} has no fast (tokenizers) form; "
                                       "the thin SDK needs tokenizer.json")
    special = {}
    for name in SPECIAL_NAMES:
        value = getattr(hf, f"{name}_token_id", None)
        if isinstance(value, int):
            special[name] = value
    pad = special.get("pad", special.get("eos"))
    if pad is None:
        raise ManifestError("$.model", "the tokenizer has neither a pad nor an eos token to pad with")
    backend.no_padding()
    backend.enable_truncation(max_length, strategy=strategy, direction=side)
    probe = backend.encode("a", add_special_tokens=True)
    leading = bool(probe.special_tokens_mask) and probe.special_tokens_mask[0] == 1
    # "content" rows exclude what the tokenizer inserts, not every special id: [UNK] is content.
    inserted = {int(pad)}
    for enc in (probe, backend.encode("a", "b", add_special_tokens=True)):
        inserted |= {i for i, m in zip(enc.ids, enc.special_tokens_mask) if m}
    src = tok_dir / "tokenizer.json"
    return TokenizerInfo(backend, special, sorted(set(hf.all_special_ids)), sorted(inserted), int(pad), leading,
                         src if src.is_file() else None)


def save_tokenizer(tok: TokenizerInfo, path: Path) -> str:
    """Write the artifact's tokenizer file (truncation as resolved, padding off); return its sha256. The build
    and reconciliation both write it this way, so their hashes compare."""
    from readout_sdk.artifact import sha256_file

    tok.backend.save(str(path))
    return sha256_file(path)
