"""Real text for parity runs: a built-in corpus per family, or the user's JSONL.

JSONL lines carry the family's fields (`Family.fields`, the same names serving rows carry): {"text": ...};
{"query": ..., "document": ...} for cross-encoders; {"question": ..., "context": ...} for QA;
{"question": ..., "choices": [...]} for multiple choice; any pair may also be {"first": ..., "second": ...}.
The built-in corpus spans one content token
up to past max_length (cut by truncation, or split into windows where the record declares them). Which items
a family's corpus holds, and how a row reads, its input kind says (`readout_sdk.input_kinds`): this module holds
the material and the file handling.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from readout_sdk.errors import SdkError
from readout_sdk.families import REGISTRY, Family
from readout_sdk.input_kinds import Material
from readout_sdk.jsonl import objects

LONG = ("Transformers encode every token of a sentence into a contextual vector, and the readout decides which "
        "rows are pooled, whether special tokens count, how vectors are projected and normalized, and what the "
        "numbers mean. ") * 12
TEXTS = [
    "a", "Hello", "The cat sat on the mat.", "A kitten naps on the rug.", "Dogs bark at the mailman.",
    "Paris is the capital of France.", "Berlin is the capital of Germany.", "Madrid is in Spain.",
    "Stocks fell sharply on Monday.", "The central bank raised interest rates.", "Markets rallied after the news.",
    "I loved this film, the acting was superb.", "Terrible service, I will never come back.",
    "The package arrived two days late.", "Ada Lovelace wrote notes on the Analytical Engine in London.",
    "Left padding changes BERT outputs unless positions come from the mask.",
    "A measurement not taken is not evaluated, never a silent pass.", "naïve café résumé — déjà vu",
    "hello 🤗 world", "The river runs for three hundred kilometres to the sea.",
    "Photosynthesis turns light into chemical energy.", "The quick brown fox jumps over the lazy dog.",
    "Quantum computers use qubits.", "She plays the violin every evening.", "Rain is expected tomorrow afternoon.",
    "The museum opens at nine.", "He forgot his umbrella at the station.", "Tea or coffee?",
    "Shape is not meaning.", "short one", LONG,
]
PAIRS = [
    ("Who wrote the notes?", "Ada Lovelace wrote notes on the Analytical Engine in London in 1843."),
    ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, the capital of France."),
    ("What changes outputs?", "Left padding with unshifted absolute positions changes BERT outputs."),
    ("Why?", "Because shape is not meaning."),
    ("When does the museum open?", "The museum opens at nine and closes at five."),
    ("What rose?", "The central bank raised interest rates on Monday."),
    ("a", "b"),
    ("What do transformers encode?", LONG),
]
CHOICES = [
    ("The capital of France is", ["Paris.", "Berlin, a city in Germany.", "the moon"]),
    ("A zero-row pool is", ["refused loudly.", "a silent zero vector", "fine"]),
    ("Padding is", ["not identity", "identity", "a position shift that changes every row"]),
    ("Which runtime needs no torch?", ["the thin SDK", "eager PyTorch", "a notebook"]),
    ("Outputs return", ["in input order", "sorted by length", "at random"]),
]


MATERIAL = Material(TEXTS, PAIRS, CHOICES)  # what each input kind draws its built-in items from


class CorpusError(SdkError, ValueError):
    """A corpus file whose rows are not items of the family (the message names the file and line)."""


def default_corpus(family: Family) -> list[Any]:
    """The built-in corpus for a family, by what one of its items is (`InputKind.corpus`)."""
    return family.kind.corpus(family, MATERIAL)


def load_corpus(path: str | Path, family: Family) -> list[Any]:
    """Read a JSONL corpus of ``family``'s rows; each problem names its line."""
    items: list[Any] = []
    kind = family.kind
    for n, row in objects(path, CorpusError):
        row = kind.load_row(family, row, REGISTRY.values())  # e.g. a pair in another pair family's field names
        try:
            item = family.row_item(n, row)
            items.append(family.check_item(n, item))
        except (TypeError, ValueError) as e:
            raise CorpusError(f"{path}:{n}: {e}") from None
    if not items:
        raise CorpusError(f"{path}: no items")
    return items


def distinct_items(items: list[Any]) -> tuple[list[Any], int]:
    """``items`` with each repeated item kept once (first occurrence, order kept), and how many were dropped.
    Items are equal when their fields are (a tuple and a list of the same strings are one item)."""
    seen: set[str] = set()
    out: list[Any] = []
    for item in items:
        key = json.dumps(item, sort_keys=True, ensure_ascii=False, default=list)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out, len(items) - len(out)


def _sentences() -> list[str]:
    words = [t for t in TEXTS if t != LONG and len(t.split()) > 2]
    return words + [s.strip() + "." for s in LONG.split(". ")[:3] if s.strip()]


def mixed_corpus(family: Family, n: int, seed: int, min_words: int = 5, max_words: int = 110) -> list[Any]:
    """``n`` items of uniformly spread lengths (in words), recombined from the built-in sentences with a
    seeded generator: a fixed mixed-length corpus for benchmarks and int8 calibration (about 8..148 tokens
    for WordPiece vocabularies at the default word range)."""
    import random

    rng = random.Random(seed)
    pool = _sentences()

    def text(words: int) -> str:
        out: list[str] = []
        while len(out) < words:
            out += rng.choice(pool).split()
        return " ".join(out[:words])

    items: list[Any] = []
    kind = family.kind
    for _ in range(n):
        words = rng.randint(min_words, max_words)
        items.append(kind.mixed_item(family, rng, words, text, MATERIAL))
    return items
