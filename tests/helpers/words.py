"""The word oracle: a tokenizer's words as character spans, from its own normalizer and pre-tokenizer."""
from __future__ import annotations

from tokenizers import PreTokenizedString, Tokenizer


def oracle_words(tok: Tokenizer, text: str) -> list[tuple[int, int]]:
    """The tokenizer's words as character spans of ``text``, from its normalizer and pre-tokenizer.

    A post-processor with ``trim_offsets`` (byte-level BPE) reports token offsets without the leading
    space the pre-tokenizer glued to the word, so the word span is trimmed the same way (an all-space
    word shrinks to an empty span at its end)."""
    pts = PreTokenizedString(text)
    if tok.normalizer is not None:
        pts.normalize(lambda n: tok.normalizer.normalize(n))
    if tok.pre_tokenizer is not None:
        tok.pre_tokenizer.pre_tokenize(pts)
    spans = [o for _, o, _ in pts.get_splits(offset_referential="original", offset_type="char")]
    if getattr(tok.post_processor, "trim_offsets", False):
        trimmed = []
        for a, b in spans:
            while a < b and text[a].isspace():
                a += 1
            while b > a and text[b - 1].isspace():
                b -= 1
            trimmed.append((a, b))
        spans = trimmed
    return spans
