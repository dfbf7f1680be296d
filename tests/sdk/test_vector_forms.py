"""Vector forms against independent oracles: sentence-transformers' truncate/quantize (bit for bit),
torch's normalize, a python-integer Hamming count, scipy distances, and JSON."""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from readout_sdk.vector_forms import (PRECISIONS, VectorForm, apply, fit_ranges, from_record,
                                      hamming_distance, similarity, to_record)



def _st_util() -> types.ModuleType:
    """sentence-transformers' own ``util/quantization.py`` (and the ``util/tensor.py`` it imports),
    loaded from the installed package without running its ``__init__``: importing
    ``sentence_transformers`` pulls in transformers and takes ~9 s, the oracle needs none of it."""
    spec = importlib.util.find_spec("sentence_transformers")  # locates, does not import
    assert spec is not None and spec.submodule_search_locations, "sentence-transformers is not installed"
    util_dir = Path(list(spec.submodule_search_locations)[0]) / "util"
    name = "_st_util_oracle"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(util_dir)]  # so `from .tensor import ...` resolves inside util/
        sys.modules[name] = package
    return importlib.import_module(f"{name}.quantization")


_ST = _st_util()
quantize_embeddings = _ST.quantize_embeddings
truncate_embeddings = importlib.import_module("_st_util_oracle.tensor").truncate_embeddings
DIM = 64
WIDTHS = (1, 7, 8, 13, 32, 64)


def _unit(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


CORPUS = _unit(120, 0)
CALIBRATION = _unit(300, 1)


def _form(width: int, precision: str, renormalize: bool = True, calibration: np.ndarray = CALIBRATION,
          float_score: str = "cosine") -> VectorForm:
    ranges = fit_ranges(calibration, width, renormalize) if precision in ("int8", "uint8") else None
    return VectorForm(width=width, precision=precision, float_score=float_score, renormalize=renormalize,
                      ranges=ranges)


def test_oracle_is_the_installed_sentence_transformers_code():
    for fn, file in ((quantize_embeddings, "quantization.py"), (truncate_embeddings, "tensor.py")):
        assert Path(fn.__code__.co_filename).parts[-3:] == ("sentence_transformers", "util", file)


def _st_prefix(v: np.ndarray, width: int, renormalize: bool) -> np.ndarray:
    """The prefix as sentence-transformers + torch make it: truncate_embeddings, then F.normalize."""
    t = truncate_embeddings(v, width)
    if renormalize:
        t = torch.nn.functional.normalize(torch.from_numpy(np.ascontiguousarray(t)), p=2, dim=1).numpy()
    return t


# --- truncation and re-normalization ---------------------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS)
def test_truncation_is_st_truncate_embeddings(width):
    got = apply(_form(width, "float32", renormalize=False), CORPUS)
    assert got.dtype == np.float32 and got.shape == (len(CORPUS), width)
    assert np.array_equal(got, truncate_embeddings(CORPUS, width))


@pytest.mark.parametrize("width", WIDTHS)
def test_renormalized_prefix_is_torch_normalize(width):
    got = apply(_form(width, "float32"), CORPUS)
    np.testing.assert_allclose(got, _st_prefix(CORPUS, width, True), rtol=0, atol=2e-7)
    np.testing.assert_allclose(np.linalg.norm(got.astype(np.float64), axis=1), 1.0, atol=1e-6)


def test_zero_prefix_stays_zero_and_width_above_dim_is_refused():
    v = CORPUS.copy()
    v[2, :8] = 0.0
    assert np.array_equal(apply(_form(8, "float32"), v)[2], np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="width 65 exceeds the vectors' dimension 64"):
        apply(VectorForm(width=65, precision="float32", float_score="cosine", renormalize=True), CORPUS)


# --- quantization: bit for bit with quantize_embeddings -----------------------------------------------

@pytest.mark.parametrize("renormalize", (True, False))
@pytest.mark.parametrize("width", WIDTHS[1:])  # width 1 renormalized is +-1 only: covered below
@pytest.mark.parametrize("precision", ("int8", "uint8"))
def test_scalar_quantization_is_st_bit_for_bit(precision, width, renormalize):
    # queries from a wider distribution than the calibration corpus, so some codes clip at 0 and 255
    queries = np.concatenate([CORPUS, 3 * CORPUS])
    form = _form(width, precision, renormalize)
    got = apply(form, queries)
    # ST is given the SDK's float prefix (which matches torch's normalize to ~1 ulp, tested above):
    # the floor of a quantization step would turn that ulp into a different code now and then
    prefix = apply(_form(width, "float32", renormalize), queries)
    calibration = apply(_form(width, "float32", renormalize), CALIBRATION)
    by_calibration = quantize_embeddings(prefix, precision, calibration_embeddings=calibration)
    by_ranges = quantize_embeddings(prefix, precision, ranges=form.ranges)
    assert got.dtype == by_calibration.dtype == np.dtype(precision)
    assert np.array_equal(got, by_calibration) and np.array_equal(got, by_ranges)
    assert got.min() == np.iinfo(precision).min and got.max() == np.iinfo(precision).max  # clipping exercised
    # ranges are ST's: the per-dimension min and max of the calibration prefix
    assert np.array_equal(form.ranges, np.vstack((calibration.min(0), calibration.max(0))))


@pytest.mark.parametrize("precision", ("int8", "uint8"))
def test_constant_calibration_dimension_uses_st_unit_step(precision):
    calibration = CALIBRATION.copy()
    calibration[:, 3] = 0.25
    form = _form(16, precision, renormalize=False, calibration=calibration)
    assert form.ranges[0, 3] == form.ranges[1, 3] == np.float32(0.25)
    expected = quantize_embeddings(truncate_embeddings(CORPUS, 16), precision,
                                   calibration_embeddings=truncate_embeddings(calibration, 16))
    assert np.array_equal(apply(form, CORPUS), expected)


@pytest.mark.parametrize("renormalize", (True, False))
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("precision", ("binary", "ubinary"))
def test_binary_quantization_is_st_bit_for_bit(precision, width, renormalize):
    form = _form(width, precision, renormalize)
    got = apply(form, CORPUS)
    expected = quantize_embeddings(apply(_form(width, "float32", renormalize), CORPUS), precision)
    # signs cannot tell a 1-ulp difference: torch's own prefix packs the same
    assert np.array_equal(expected, quantize_embeddings(_st_prefix(CORPUS, width, renormalize), precision))
    assert got.dtype == expected.dtype == np.dtype(form.dtype)
    assert got.shape == (len(CORPUS), form.dim) == (len(CORPUS), -(-width // 8))
    assert np.array_equal(got, expected)


def test_float32_form_is_st_float32():
    form = _form(32, "float32", renormalize=False)
    assert np.array_equal(apply(form, CORPUS), quantize_embeddings(truncate_embeddings(CORPUS, 32), "float32"))


# --- NaN rows -------------------------------------------------------------------------------------

def test_nan_row_stays_nan_in_float32_and_leaves_other_rows_alone():
    v = CORPUS.copy()
    v[3] = np.nan
    got = apply(_form(16, "float32"), v)
    assert np.isnan(got[3]).all()
    keep = np.arange(len(v)) != 3
    assert np.array_equal(got[keep], apply(_form(16, "float32"), CORPUS)[keep])
    s = similarity(_form(16, "float32"), got, got)
    assert np.isnan(s[3]).all() and np.isnan(s[:, 3]).all() and np.isfinite(s[keep][:, keep]).all()


@pytest.mark.parametrize("precision", ("int8", "uint8", "binary", "ubinary"))
def test_nan_row_is_refused_by_quantized_forms(precision):
    v = CORPUS.copy()
    v[5] = np.nan
    v[9] = np.nan
    with pytest.raises(ValueError, match=r"^row 5 is not finite"):
        apply(_form(16, precision), v)


# --- similarities ---------------------------------------------------------------------------------

def _python_bits(row: np.ndarray) -> int:
    """A prefix's signs as one python integer (first dimension most significant), no packing."""
    return int("".join("1" if x > 0 else "0" for x in row), 2)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("precision", ("binary", "ubinary"))
def test_hamming_against_python_integer_popcount(precision, width):
    form = _form(width, precision)
    a, b = CORPUS[:17], CORPUS[40:63]
    prefix_a, prefix_b = _st_prefix(a, width, True), _st_prefix(b, width, True)
    oracle = np.array([[bin(_python_bits(x) ^ _python_bits(y)).count("1") for y in prefix_b] for x in prefix_a])
    qa, qb = apply(form, a), apply(form, b)
    assert np.array_equal(hamming_distance(qa, qb, width), oracle)
    sim = similarity(form, qa, qb)
    assert sim.dtype == np.float64 and np.array_equal(sim, width - oracle)
    assert form.score == "hamming" and np.all(np.diag(similarity(form, qa, qa)) == width)


def test_hamming_ignores_padding_bits():
    width = 13  # 2 bytes: 3 padding bits at the end
    a = np.array([[0b10110011, 0b10100000]], dtype=np.uint8)
    b = np.array([[0b10110011, 0b10100111]], dtype=np.uint8)  # differs only in padding
    c = np.array([[0b10110011, 0b00100111]], dtype=np.uint8)  # bit 8 and the padding differ
    assert hamming_distance(a, b, width).tolist() == [[0]]
    assert hamming_distance(b, a, width).tolist() == [[0]]
    assert hamming_distance(a, c, width).tolist() == [[1]]
    assert hamming_distance(a, c, 16).tolist() == [[4]]
    with pytest.raises(ValueError, match=r"width 17 must be \[n, 3\] bytes, got \[1, 2\]"):
        hamming_distance(a, c, 17)


def test_hamming_over_several_chunks_with_garbage_padding():
    # 600 x 2048 bytes per row of `a` is ~1.2 MB: 13 rows a chunk, so 30 rows make 3 chunks
    width = 16381  # 3 padding bits, random on both sides
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (30, 2048), dtype=np.uint8)
    b = rng.integers(0, 256, (600, 2048), dtype=np.uint8)
    expected = np.array([np.unpackbits(row ^ b, axis=-1, count=width).sum(-1) for row in a])
    assert np.array_equal(hamming_distance(a, b, width), expected)


@pytest.mark.parametrize("precision", ("int8", "uint8"))
def test_integer_dot_is_exact_python_integer_dot(precision):
    form = _form(64, precision)
    a, b = apply(form, CORPUS[:9]), apply(form, 3 * CORPUS[20:31])
    oracle = np.array([[sum(int(x) * int(y) for x, y in zip(r, s)) for s in b] for r in a])
    sim = similarity(form, a, b)
    assert form.score == "dot" and sim.dtype == np.float64
    assert np.array_equal(sim, oracle)


def test_integer_dot_does_not_overflow():
    width = 4096
    form = VectorForm(width=width, precision="int8", float_score="cosine", renormalize=False,
                      ranges=np.vstack([np.zeros(width), np.ones(width)]))
    low = np.full((2, width), -128, dtype=np.int8)
    assert similarity(form, low, low).tolist() == [[128 * 128 * width] * 2] * 2


@pytest.mark.parametrize("score", ("cosine", "dot", "euclidean"))
def test_float_similarities_against_scipy(score):
    v = CORPUS * np.linspace(0.5, 2.0, len(CORPUS), dtype=np.float32)[:, None]  # not unit: cosine != dot
    form = _form(32, "float32", renormalize=False, float_score=score)
    a, b = apply(form, v[:10]), apply(form, v[50:70])
    oracle = {"cosine": 1 - cdist(a.astype(np.float64), b.astype(np.float64), "cosine"),
              "dot": a.astype(np.float64) @ b.astype(np.float64).T,
              "euclidean": -cdist(a.astype(np.float64), b.astype(np.float64))}[score]
    assert form.score == score
    np.testing.assert_allclose(similarity(form, a, b), oracle, rtol=1e-12, atol=1e-12)


def test_similarity_refuses_vectors_of_another_form():
    form = _form(16, "binary")
    with pytest.raises(ValueError, match=r"must be \[n, 2\] int8 vectors of form 16/binary"):
        similarity(form, apply(_form(16, "ubinary"), CORPUS), apply(form, CORPUS))
    with pytest.raises(ValueError, match=r"b must be \[n, 16\] float32"):
        similarity(_form(16, "float32"), apply(_form(16, "float32"), CORPUS), CORPUS)


# --- the form itself ------------------------------------------------------------------------------

@pytest.mark.parametrize("precision,score,dim,dtype", [
    ("float32", "dot", 20, "float32"), ("int8", "dot", 20, "int8"), ("uint8", "dot", 20, "uint8"),
    ("binary", "hamming", 3, "int8"), ("ubinary", "hamming", 3, "uint8")])
def test_properties(precision, score, dim, dtype):
    form = _form(20, precision, float_score="dot")
    assert (form.score, form.dim, form.dtype, form.name) == (score, dim, dtype, f"20/{precision}")
    assert apply(form, CORPUS).shape == (len(CORPUS), dim) and apply(form, CORPUS).dtype == np.dtype(dtype)
    assert _form(20, "float32", float_score="cosine").score == "cosine"
    assert PRECISIONS == ("float32", "int8", "uint8", "binary", "ubinary")


@pytest.mark.parametrize("kwargs,message", [
    (dict(width=8, precision="fp16"), "precision must be one of"),
    (dict(width=0, precision="float32"), "width must be a positive integer"),
    (dict(width=True, precision="float32"), "width must be a positive integer"),
    (dict(width=8.0, precision="float32"), "width must be a positive integer"),
    (dict(width=8, precision="int8"), "ranges are required for int8"),
    (dict(width=8, precision="uint8"), "ranges are required for uint8"),
    (dict(width=8, precision="binary", ranges=np.zeros((2, 8))), "ranges apply only to int8/uint8"),
    (dict(width=8, precision="int8", ranges=np.zeros((2, 7))), r"ranges must have shape \[2, 8\]"),
    (dict(width=2, precision="int8", ranges=[[0, np.nan], [1, 1]]), "ranges must be finite"),
    (dict(width=2, precision="int8", ranges=[[0, 2], [1, 1]]), "minimum exceeds maximum at dimension 1"),
    (dict(width=2, precision="int8", ranges=[["a", 0], [1, 1]]), "ranges must be numbers"),
    (dict(width=8, precision="float32", float_score="manhattan"), "float_score must be one of"),
    (dict(width=8, precision="float32", renormalize="yes"), "renormalize must be true or false"),
])
def test_form_refusals(kwargs, message):
    kwargs = {"float_score": "cosine", "renormalize": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        VectorForm(**kwargs)


def test_form_is_frozen_and_compares_by_value():
    a, b = _form(16, "int8"), _form(16, "int8")
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != _form(16, "int8", calibration=CORPUS) and a != _form(16, "uint8") and a != _form(16, "float32")
    with pytest.raises(Exception):
        a.width = 3
    with pytest.raises(ValueError):
        a.ranges[0, 0] = 1.0  # read-only: a form cannot drift from its record


def test_fit_ranges_refusals():
    with pytest.raises(ValueError, match="at least 2 calibration vectors, got 1"):
        fit_ranges(CORPUS[:1], 8, True)
    v = CALIBRATION.copy()
    v[7, 3] = np.nan
    with pytest.raises(ValueError, match="calibration row 7 is not finite"):
        fit_ranges(v, 8, True)
    v[7, 3], v[7, 40] = 0.0, np.nan  # outside the prefix: truncation cuts it off before renormalizing
    assert np.isfinite(fit_ranges(v, 8, True)).all()
    with pytest.raises(ValueError, match="width 65 exceeds"):
        fit_ranges(CALIBRATION, 65, True)
    with pytest.raises(ValueError, match="floating point"):
        fit_ranges(np.ones((3, 8), dtype=np.int8), 8, False)
    with pytest.raises(ValueError, match=r"2-D \[n, dim\]"):
        fit_ranges(CALIBRATION[0], 8, False)


# --- records --------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision", PRECISIONS)
def test_record_round_trips_through_json_bit_for_bit(precision):
    form = _form(24, precision, renormalize=precision != "uint8")
    text = json.dumps(to_record(form))
    back = from_record(json.loads(text), "cosine")
    assert back == form
    if form.ranges is not None:
        assert back.ranges.dtype == np.float32 and back.ranges.tobytes() == form.ranges.tobytes()
        assert np.array_equal(apply(back, CORPUS), apply(form, CORPUS))
    assert json.loads(text) == to_record(back)


def test_record_rounds_foreign_ranges_to_float32_as_st_does():
    form = from_record({"width": 1, "precision": "int8", "renormalize": False, "ranges": [[0.1], [0.7]]}, "dot")
    assert form.ranges.tolist() == [[float(np.float32(0.1))], [float(np.float32(0.7))]]
    x = np.array([[0.3], [0.65], [0.1]], dtype=np.float32)
    assert np.array_equal(apply(form, x), quantize_embeddings(x, "int8", ranges=np.array([[0.1], [0.7]])))


_GOOD = {"width": 4, "precision": "int8", "renormalize": True, "ranges": [[0.0] * 4, [1.0] * 4]}


@pytest.mark.parametrize("change,message", [
    ({"width": None}, "missing field 'width'"),
    ({"precision": None}, "missing field 'precision'"),
    ({"renormalize": None}, "missing field 'renormalize'"),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"width": "4"}, "width must be a positive integer"),
    ({"width": True}, "width must be a positive integer"),
    ({"width": -4}, "width must be a positive integer"),
    ({"precision": "int4"}, "precision must be one of"),
    ({"renormalize": 1}, "renormalize must be true or false"),
    ({"ranges": None}, "ranges are required for int8"),
    ({"ranges": [[0.0] * 4, [1.0] * 3]}, "ranges must"),
    ({"ranges": [[0.0] * 4, [1.0, 1.0, True, 1.0]]}, "ranges must be null or a list of two lists of numbers"),
    ({"ranges": "0,1"}, "ranges must be null or a list"),
    ({"ranges": [[0.0] * 4, [1.0] * 4, [2.0] * 4]}, r"ranges must have shape \[2, 4\]"),
    ({"precision": "binary"}, "ranges apply only to int8/uint8"),
])
def test_record_refusals_name_the_field(change, message):
    record = {**_GOOD, **change}
    record = {k: v for k, v in record.items() if not (v is None and k != "ranges")}
    with pytest.raises(ValueError, match=message) as info:
        from_record(record, "cosine")
    assert "\n" not in str(info.value)


def test_record_must_be_an_object_and_score_is_validated():
    with pytest.raises(ValueError, match="must be an object, got list"):
        from_record([4, "int8"], "cosine")
    with pytest.raises(ValueError, match="float_score must be one of"):
        from_record({"width": 4, "precision": "binary", "renormalize": True}, "hamming")
    assert from_record({"width": 4, "precision": "binary", "renormalize": True}, "dot").ranges is None
