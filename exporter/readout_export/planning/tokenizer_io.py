"""Prepare the artifact's tokenizer: a `tokenizers` JSON file whose truncation matches the record.

Padding is switched off in the file: the runtime pads to the side it chooses, and the record says
which sides are supported. Source tokenizer files sometimes carry stale fixed padding/truncation
(all-MiniLM-L6-v2 pads and truncates at 128 while its model card says 256); the record is the truth.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.input_kinds import SAMPLE_PAIRS, SAMPLE_TEXTS, get as input_kind_of  # noqa: F401 (re-exported)

from readout_export.errors import ManifestError

SPECIAL_NAMES = ("cls", "sep", "pad", "bos", "eos", "unk", "mask")
# what a tokenizer must encode without failing: plain words, digits, punctuation, accents, an emoji, no text
PROBES = ["a", "Readout export, 2024: ca\u00e7a \u00e0 la cr\u00e8me? \U0001f600", ""]


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
        # trust_remote_code=False, explicitly: tokenizer code is never run, and transformers never asks on the terminal
        hf = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True, use_fast=True, trust_remote_code=False)
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
    try:  # a tokenizer.json that loads may still fail on text (a WordPiece without its [UNK], ...)
        backend.no_truncation()
        probes = [backend.encode(t, add_special_tokens=True) for t in PROBES]
        pair = backend.encode("a", "b", add_special_tokens=True)
        backend.enable_truncation(max_length, strategy=strategy, direction=side)
    except Exception as e:  # noqa: BLE001 - tokenizers raises a bare Exception (or a panic) naming its own error
        from readout_sdk.errors import first_line

        raise ManifestError("$.model", f"the tokenizer in {tok_dir} cannot encode plain text "
                                       f"({first_line(e)[:200]})") from None
    probe = probes[0]
    leading = bool(probe.special_tokens_mask) and probe.special_tokens_mask[0] == 1
    # "content" rows exclude what the tokenizer inserts, not every special id: [UNK] is content.
    inserted = {int(pad)}
    for enc in (probe, pair):
        inserted |= {i for i, m in zip(enc.ids, enc.special_tokens_mask) if m}
    if not all(isinstance(i, int) and 0 <= i < 1 << 31 for i in inserted):
        raise ManifestError("$.model", f"the tokenizer in {tok_dir} uses special token ids {sorted(inserted)[:5]}, "
                                       "outside the range of a token id")
    src = tok_dir / "tokenizer.json"
    return TokenizerInfo(backend, special, sorted(set(hf.all_special_ids)), sorted(inserted), int(pad), leading,
                         src if src.is_file() else None)


def encode_samples(input_kind: str, backend: Any) -> list[Any]:
    """The build's sample inputs as this backend encodes them (truncation as resolved), as the input kind named
    ``input_kind`` makes them (`InputKind.sample_inputs`: a text each, or a pair each for pair and choice kinds)."""
    return input_kind_of(input_kind).sample_inputs(backend)


def check_room(tok: TokenizerInfo, input_kind: str, max_length: int, family: str) -> None:
    """``max_length`` leaves room for text beside what the tokenizer inserts (one token of each part of a pair
    at least), and the build's sample inputs encode under it; else refused at ``$.max_length``."""
    backend = tok.backend
    pair = input_kind_of(input_kind).tokenizer_pairs
    saved = backend.truncation
    backend.no_truncation()
    try:
        inserted = backend.num_special_tokens_to_add(pair)
    finally:
        backend.enable_truncation(**saved) if saved else backend.no_truncation()
    need = inserted + (2 if pair else 1)
    if max_length < need:
        what = "a question and its context" if pair else "a text"
        raise ManifestError("$.max_length", f"{max_length} leaves no room for {what}: the tokenizer adds "
                                            f"{inserted} special tokens, so {family} needs at least {need}")
    try:
        encode_samples(input_kind, backend)
    except Exception as e:  # noqa: BLE001 - tokenizers refuses a pair whose first part alone overflows
        from readout_sdk.errors import first_line

        raise ManifestError("$.max_length", f"{max_length} is too short for {family}: the tokenizer cannot fit "
                                            f"the build's sample inputs ({first_line(e)[:160]})") from None


def save_tokenizer(tok: TokenizerInfo, path: Path) -> str:
    """Write the artifact's tokenizer file (truncation as resolved, padding off); return its sha256. The build
    and reconciliation both write it this way, so their hashes compare."""
    from readout_sdk.artifact import sha256_file

    tok.backend.save(str(path))
    return sha256_file(path)
