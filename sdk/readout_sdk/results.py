"""Typed, frozen results. Every list of results is in input order."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from readout_sdk.errors import FormError


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Embeddings:
    """Vectors for n texts, with the similarity the model was trained for.

    ``score_type`` is ``cosine``, ``dot`` or ``euclidean`` (reported as negative distance, so that
    larger is always more similar).
    """

    vectors: np.ndarray
    normalized: bool
    score_type: str
    truncated: tuple[bool, ...] = ()
    role: str | None = None  # the input role the vectors were made under (`readout_sdk.roles`); None: none
    # the declared vector form (`readout_sdk.vector_forms.VectorForm`: width and precision) the vectors are
    # in; None: the full float32 vector. Quantized forms keep their integer dtype.
    form: Any = None

    def __post_init__(self) -> None:
        dtype = np.float32 if self.form is None else np.dtype(self.form.dtype)
        object.__setattr__(self, "vectors", _frozen(np.asarray(self.vectors, dtype=dtype)))

    def __len__(self) -> int:
        return len(self.vectors)

    def similarity(self, other: "Embeddings") -> np.ndarray:
        """[len(self), len(other)] similarities under the declared score type (a form's own score:
        cosine or dot for float32 forms, dot of int8/uint8 codes, agreeing bits for binary forms)."""
        if self.form is not None or other.form is not None:
            names = [e.form.name if e.form is not None else "full float32" for e in (self, other)]
            if self.form != other.form:
                raise FormError(f"cannot compare vectors of form {names[0]} with vectors of form {names[1]}")
        if other.score_type != self.score_type:
            raise FormError(f"cannot compare {self.score_type} embeddings with {other.score_type} embeddings")
        if self.form is not None:
            from readout_sdk.vector_forms import similarity

            return similarity(self.form, self.vectors, other.vectors).astype(np.float32)
        a = self.vectors.astype(np.float64)
        b = other.vectors.astype(np.float64)
        if self.score_type == "cosine":
            a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
            b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
            return (a @ b.T).astype(np.float32)
        if self.score_type == "dot":
            return (a @ b.T).astype(np.float32)
        d = np.sqrt(np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0))
        return (-d).astype(np.float32)


@dataclass(frozen=True)
class Classification:
    """Single-label decision: ``label`` is the argmax (ties to the lowest index), or None with
    ``abstained`` when the record's abstention rule declines to decide (its top score is under the
    calibrated ``min_score``; ``score`` and ``top`` still say what the argmax was)."""

    label: str | None
    score: float
    scores: dict[str, float]
    score_kind: str  # "probability" (softmax/sigmoid) or "logit"
    top: tuple[tuple[str, float], ...] = ()
    truncated: bool = False
    abstained: bool = False


@dataclass(frozen=True)
class MultiLabel:
    """Multilabel decision: every label whose probability reaches its threshold, in label order."""

    labels: tuple[str, ...]
    scores: dict[str, float]
    thresholds: dict[str, float]
    score_kind: str = "probability"
    truncated: bool = False


@dataclass(frozen=True)
class Regression:
    """Named regression outputs."""

    values: dict[str, float]
    truncated: bool = False


@dataclass(frozen=True)
class Entity:
    """A tagged span: ``text == source[start:end]`` (character offsets into the original text)."""

    label: str
    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True)
class TaggedText:
    """The entities of one text (iterable like a list) and whether the text was cut at max_length."""

    entities: tuple[Entity, ...]
    truncated: bool = False

    def __iter__(self):
        return iter(self.entities)

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i):
        return self.entities[i]


@dataclass(frozen=True)
class Answer:
    """An answer span in the context (character offsets), or the no-answer result (``is_null``)."""

    text: str
    start: int
    end: int
    score: float
    is_null: bool = False


@dataclass(frozen=True)
class Scored:
    """One scored pair or document, carrying its input index."""

    index: int
    score: float
    document: str | None = None
    scores: tuple[float, ...] = ()  # every class's score (multi-class cross-encoders); score is the last one
    truncated: bool = False


@dataclass(frozen=True)
class TokenVectors:
    """Per-row vectors of the rows the readout keeps (late interaction), in row order."""

    vectors: np.ndarray
    tokens: tuple[str, ...] = field(default_factory=tuple)
    truncated: bool = False
    role: str | None = None  # the input role the vectors were made under (`readout_sdk.roles`); None: none

    def __post_init__(self) -> None:
        object.__setattr__(self, "vectors", _frozen(np.asarray(self.vectors, dtype=np.float32)))


@dataclass(frozen=True)
class SparseVector:
    """Nonzero vocabulary weights (SPLADE), sorted by weight, descending."""

    indices: np.ndarray
    values: np.ndarray
    tokens: tuple[str, ...]
    truncated: bool = False
    role: str | None = None  # the input role the weights were made under (`readout_sdk.roles`); None: none

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", _frozen(np.asarray(self.indices, dtype=np.int64)))
        object.__setattr__(self, "values", _frozen(np.asarray(self.values, dtype=np.float32)))

    def dot(self, other: "SparseVector") -> float:
        """Sparse dot product."""
        mine = dict(zip(self.indices.tolist(), self.values.tolist()))
        return float(sum(mine.get(i, 0.0) * v for i, v in zip(other.indices.tolist(), other.values.tolist())))


@dataclass(frozen=True)
class Choice:
    """Multiple choice: the chosen index and text, with softmax probabilities over the choices."""

    index: int
    choice: str
    score: float
    scores: tuple[float, ...]
    truncated: bool = False
