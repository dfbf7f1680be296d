"""Vector forms: the declared reduced shapes of an embedding artifact's vectors (numpy only).

A form keeps the leading ``width`` dimensions (Matryoshka truncation), optionally re-normalizes
that prefix to unit length, and stores it at a ``precision``: ``float32``, scalar-quantized
``int8``/``uint8`` (per-dimension ranges fitted on a calibration corpus) or sign-packed
``binary``/``ubinary``. Quantization reproduces ``sentence_transformers.quantize_embeddings``
bit for bit, so vectors stored by either side can be searched by the other.

Policies (the choices a caller cannot see from the arrays alone):

* NaN rows (texts with no content rows): a ``float32`` form keeps them NaN; a quantized form
  refuses them with a FormError (a ValueError) naming the first such row, because every integer code is a
  valid vector and a NaN would silently become one (``floor(nan)`` casts to an arbitrary code,
  and ``nan > 0`` packs as all-zero bits).
* Binary similarity is ``width - hamming_distance``: the number of kept bits on which two
  vectors agree, so that larger is closer, as for every other score. The bits ``np.packbits``
  pads the last byte with are never counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from readout_sdk.errors import FormError

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
# the similarity a float32 form inherits from the artifact (`readout_sdk.results.Embeddings`)
FLOAT_SCORES = ("cosine", "dot", "euclidean")
_QUANTIZED_INT = ("int8", "uint8")
_BINARY = ("binary", "ubinary")
_DTYPES = {"float32": "float32", "int8": "int8", "uint8": "uint8", "binary": "int8", "ubinary": "uint8"}
_RECORD_KEYS = ("width", "precision", "renormalize", "ranges")
# set bits per byte value: a table rather than np.bitwise_count, which needs numpy >= 2
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
_NORM_EPS = 1e-12  # the clamp torch.nn.functional.normalize uses, so zero rows stay zero


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_ranges(ranges: object, width: int) -> np.ndarray:
    """``ranges`` as a read-only float32 [2, width] array, or FormError naming the field."""
    try:
        # float32 because quantize_embeddings casts ranges to float32 before using them
        r = np.array(ranges, dtype=np.float32)
    except (TypeError, ValueError):
        raise FormError(f"vector form: ranges must be numbers, shape [2, {width}]") from None
    if r.shape != (2, width):
        raise FormError(f"vector form: ranges must have shape [2, {width}] (min row, max row), got {list(r.shape)}")
    if not np.isfinite(r).all():
        raise FormError("vector form: ranges must be finite")
    bad = np.flatnonzero(r[0] > r[1])
    if bad.size:
        raise FormError(f"vector form: ranges minimum exceeds maximum at dimension {int(bad[0])}")
    r.setflags(write=False)
    return r


@dataclass(frozen=True, kw_only=True, eq=False)
class VectorForm:
    """One declared form: ``width`` leading dims, stored at ``precision``.

    ``ranges`` ([2, width] float32: per-dimension minimum, then maximum, over a calibration corpus)
    is required for int8/uint8 and must be None otherwise. ``renormalize`` is True when the full
    vector is L2-normalized: the truncated prefix is then scaled back to unit length before
    quantization, so that its cosine is its dot product. ``float_score`` is the artifact's declared
    score type, which a float32 form keeps.
    """

    width: int
    precision: str
    float_score: str
    renormalize: bool
    ranges: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        if not _is_int(self.width) or self.width < 1:
            raise FormError(f"vector form: width must be a positive integer, got {self.width!r}")
        object.__setattr__(self, "width", int(self.width))
        if self.precision not in PRECISIONS:
            raise FormError(f"vector form: precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.float_score not in FLOAT_SCORES:
            raise FormError(f"vector form: float_score must be one of {', '.join(FLOAT_SCORES)}, "
                             f"got {self.float_score!r}")
        if not isinstance(self.renormalize, (bool, np.bool_)):
            raise FormError(f"vector form: renormalize must be true or false, got {self.renormalize!r}")
        object.__setattr__(self, "renormalize", bool(self.renormalize))
        if self.precision in _QUANTIZED_INT:
            if self.ranges is None:
                raise FormError(f"vector form: ranges are required for {self.precision} "
                                 "(fit them with fit_ranges on a calibration corpus)")
            object.__setattr__(self, "ranges", _check_ranges(self.ranges, self.width))
        elif self.ranges is not None:
            raise FormError(f"vector form: ranges apply only to int8/uint8, not {self.precision}")

    # eq/hash by hand: the dataclass versions would compare and hash the ranges array itself
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VectorForm):
            return NotImplemented
        same_ranges = (self.ranges is None and other.ranges is None) or (
            self.ranges is not None and other.ranges is not None and np.array_equal(self.ranges, other.ranges))
        return (self.width, self.precision, self.float_score, self.renormalize) == (
            other.width, other.precision, other.float_score, other.renormalize) and same_ranges

    def __hash__(self) -> int:
        return hash((self.width, self.precision, self.float_score, self.renormalize,
                     None if self.ranges is None else self.ranges.tobytes()))

    @property
    def score(self) -> str:
        """The similarity of stored vectors: the artifact's for float32, dot for int8/uint8,
        hamming for binary/ubinary (see `similarity` for what each returns)."""
        if self.precision == "float32":
            return self.float_score
        return "dot" if self.precision in _QUANTIZED_INT else "hamming"

    @property
    def name(self) -> str:
        """``"<width>/<precision>"``, e.g. ``"256/int8"``."""
        return f"{self.width}/{self.precision}"

    @property
    def dim(self) -> int:
        """Columns of a stored vector: ``width``, or ``ceil(width / 8)`` bytes for binary forms."""
        return (self.width + 7) // 8 if self.precision in _BINARY else self.width

    @property
    def dtype(self) -> str:
        """numpy dtype name of a stored vector (binary is int8 with ST's -128 offset; ubinary uint8)."""
        return _DTYPES[self.precision]


def _prefix(vectors: np.ndarray, width: int, renormalize: bool) -> np.ndarray:
    """The first ``width`` columns as float32, re-normalized to unit length when asked."""
    v = np.asarray(vectors)
    if v.ndim != 2:
        raise FormError(f"vectors must be a 2-D [n, dim] array, got shape {list(v.shape)}")
    if v.dtype.kind != "f":
        raise FormError(f"vectors must be floating point, got {v.dtype}")
    if width > v.shape[1]:
        raise FormError(f"width {width} exceeds the vectors' dimension {v.shape[1]}")
    v = v[:, :width].astype(np.float32)
    if renormalize:
        # norm and division in float64, rounded once to float32: the prefix of a unit vector can be
        # short, and a float32 norm would add its own rounding on top of the division's
        w = v.astype(np.float64)
        norm = np.maximum(np.linalg.norm(w, axis=1, keepdims=True), _NORM_EPS)
        with np.errstate(invalid="ignore"):  # NaN rows stay NaN, quietly
            v = (w / norm).astype(np.float32)
    return v


def _first_nonfinite_row(v: np.ndarray) -> int | None:
    bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
    return int(bad[0]) if bad.size else None


def apply(form: VectorForm, vectors: np.ndarray) -> np.ndarray:
    """``vectors`` [n, full_dim] (float) in ``form``: [n, form.dim] of ``form.dtype``.

    Truncates to ``form.width``, re-normalizes if ``form.renormalize``, then quantizes with the
    arithmetic of ``sentence_transformers.quantize_embeddings`` (given ``ranges=form.ranges``).
    A float32 form keeps NaN rows NaN; a quantized form refuses them (FormError, a ValueError, naming the row).
    The re-normalized prefix is rounded to float32 once from float64, so it may differ from torch's
    float32 ``F.normalize`` by an ulp; given the same float prefix, the codes are ST's bit for bit.
    """
    v = _prefix(vectors, form.width, form.renormalize)
    if form.precision == "float32":
        return v
    bad = _first_nonfinite_row(v)
    if bad is not None:
        raise FormError(f"row {bad} is not finite (a text with no content rows?): "
                         f"the {form.precision} form has no code for it")
    if form.precision in _QUANTIZED_INT:
        assert form.ranges is not None  # __post_init__ guarantees it
        starts = form.ranges[0, :]
        steps = (form.ranges[1, :] - starts) / 255
        # a dimension constant over the calibration corpus: ST divides by 1 instead of 0
        steps = np.where(steps == 0, 1, steps)
        q = np.clip(np.floor((v - starts) / steps), 0, 255)
        return q.astype(np.uint8) if form.precision == "uint8" else (q - 128).astype(np.int8)
    packed = np.packbits(v > 0, axis=-1)
    if form.precision == "ubinary":
        return packed
    # ST's int8 binary form: the packed byte minus 128 (uint8 arithmetic wraps, then reinterprets)
    return (packed - 128).astype(np.int8)


def fit_ranges(vectors: np.ndarray, width: int, renormalize: bool) -> np.ndarray:
    """Per-dimension [min; max] ([2, width] float32) of a calibration corpus in the form's prefix:
    what ``quantize_embeddings`` computes from ``calibration_embeddings``.

    Refuses fewer than 2 rows (one vector has no spread to quantize over) and non-finite values
    (a NaN row would make every range NaN)."""
    if not _is_int(width) or width < 1:
        raise FormError(f"width must be a positive integer, got {width!r}")
    v = _prefix(vectors, int(width), renormalize)
    if len(v) < 2:
        raise FormError(f"ranges need at least 2 calibration vectors, got {len(v)}")
    bad = _first_nonfinite_row(v)
    if bad is not None:
        raise FormError(f"calibration row {bad} is not finite")
    ranges = np.vstack((v.min(axis=0), v.max(axis=0))).astype(np.float32)
    return ranges


def hamming_distance(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """[len(a), len(b)] int64 count of differing bits among the first ``width`` bits of packed
    vectors (both binary or both ubinary: XOR cancels binary's shared -128 offset)."""
    a8 = np.ascontiguousarray(a).view(np.uint8)
    b8 = np.ascontiguousarray(b).view(np.uint8)
    nbytes = (width + 7) // 8
    if a8.ndim != 2 or b8.ndim != 2 or a8.shape[1] != nbytes or b8.shape[1] != nbytes:
        raise FormError(f"packed vectors of width {width} must be [n, {nbytes}] bytes, "
                         f"got {list(a8.shape)} and {list(b8.shape)}")
    # only the real bits: packbits fills the low bits of the last byte with zeros, but a vector
    # from elsewhere need not
    mask = np.full(nbytes, 0xFF, dtype=np.uint8)
    if width % 8:
        mask[-1] = (0xFF << (8 - width % 8)) & 0xFF
    b8 = b8 & mask
    out = np.empty((len(a8), len(b8)), dtype=np.int64)
    # rows of `a` in chunks, so the [chunk, len(b), nbytes] XOR stays near 16 MB
    step = max(1, (1 << 24) // max(1, len(b8) * nbytes))
    for s in range(0, len(a8), step):
        x = (a8[s:s + step, None, :] & mask) ^ b8[None, :, :]
        out[s:s + step] = _POPCOUNT[x].sum(axis=-1, dtype=np.int64)
    return out


def similarity(form: VectorForm, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[len(a), len(b)] float64 similarities of vectors stored in ``form`` (larger is closer).

    float32: the artifact's score (cosine; dot; euclidean as negative distance), NaN rows give NaN.
    int8/uint8: the dot product of the integer codes, exact (float64 holds every partial sum:
    |code product| <= 255**2 < 2**16, so any width below 2**37 cannot round).
    binary/ubinary: ``width - hamming_distance``, the number of kept bits that agree.
    """
    for side, x in (("a", a), ("b", b)):
        if np.asarray(x).ndim != 2 or np.asarray(x).shape[1] != form.dim or np.asarray(x).dtype != form.dtype:
            raise FormError(f"{side} must be [n, {form.dim}] {form.dtype} vectors of form {form.name}, "
                             f"got {list(np.shape(x))} {np.asarray(x).dtype}")
    if form.precision in _BINARY:
        return (form.width - hamming_distance(a, b, form.width)).astype(np.float64)
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if form.score == "cosine":
        with np.errstate(invalid="ignore"):
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), _NORM_EPS)
            y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), _NORM_EPS)
    if form.score == "euclidean":
        sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T
        return -np.sqrt(np.maximum(sq, 0.0))
    return x @ y.T


def to_record(form: VectorForm) -> dict[str, Any]:
    """JSON-safe record of ``form`` (the artifact's score type is not part of it).

    Ranges are python floats: every float32 is exactly a double, and JSON writes doubles so that
    they read back exactly, so the ranges survive a JSON round trip bit for bit."""
    return {"width": form.width, "precision": form.precision, "renormalize": form.renormalize,
            "ranges": None if form.ranges is None else [[float(x) for x in row] for row in form.ranges]}


def from_record(record: object, float_score: str) -> VectorForm:
    """The form ``record`` (from `to_record`) declares, under the artifact's ``float_score``.

    FormError (a ValueError), one line naming the field, for anything else: a missing or unknown key, a width
    that is not a positive integer (booleans included), a precision outside PRECISIONS, a
    renormalize that is not a boolean, or ranges that are not a [2, width] list of finite numbers
    with min <= max (required for int8/uint8, null otherwise). Range values are rounded to float32,
    as quantize_embeddings rounds them."""
    if not isinstance(record, dict):
        raise FormError(f"vector form record must be an object, got {type(record).__name__}")
    unknown = sorted(set(record) - set(_RECORD_KEYS), key=str)
    if unknown:
        raise FormError(f"vector form record: unknown field {unknown[0]!r}")
    for key in ("width", "precision", "renormalize"):
        if key not in record:
            raise FormError(f"vector form record: missing field {key!r}")
    ranges = record.get("ranges")
    if ranges is not None:
        # JSON booleans are python ints: refuse them before numpy reads them as 0/1
        if not isinstance(ranges, list) or not all(
                isinstance(row, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row)
                for row in ranges):
            raise FormError("vector form record: ranges must be null or a list of two lists of numbers")
    return VectorForm(width=record["width"], precision=record["precision"], float_score=float_score,
                      renormalize=record["renormalize"], ranges=ranges)
