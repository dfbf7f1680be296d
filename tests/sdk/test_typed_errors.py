"""Every error a caller can cause is typed (issue 46 point 6): an `SdkError` subclass in the SDK, parity and
evaluation, a `ReadoutExportError` in the exporter, each keeping the built-in base callers already catch
(ValueError, TypeError, KeyError, RuntimeError). Each case below triggers one refusal through the public API
and checks the class, its built-in base and that the message names the problem; a last test keeps the
libraries' plain raises counted, so a new `raise ValueError(...)` cannot slip back in."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from readout_sdk.errors import (AbiError, BadArgument, Closed, FormError, InputRefused, SdkError, UnknownName,
                                WindowError, WrongCall)

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("sdk/readout_sdk", "exporter/readout_export", "parity/readout_parity", "eval/readout_eval")
PLAIN = re.compile(r"^\s*raise (ValueError|TypeError|KeyError|RuntimeError)\b", re.M)
MAX_PLAIN = 5  # issue 46: at most 5 remain, each an internal invariant with a comment saying why


def _form(**fields: Any) -> Any:
    from readout_sdk.vector_forms import from_record

    return from_record({"width": 4, "precision": "float32", "renormalize": False, "ranges": None, **fields}, "cosine")


def _windows_out_of_order() -> Any:
    """Real tokenizers windows ([enc, *enc.overflowing], max 4 tokens, stride 1) passed last-first: the cut
    window leads, so they cannot be full windows followed by one cut window."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from readout_sdk.windows import source_positions

    words = "a b c d e f g h".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.enable_truncation(4, stride=1)
    enc = tok.encode(" ".join(words))
    windows = [enc, *enc.overflowing]
    assert [len(w.ids) for w in windows] == [4, 4, 2]  # the premise: two full windows, one cut
    assert [list(p) for p in source_positions(windows, stride=1)] == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7]]  # in order
    return source_positions(windows[::-1], stride=1)


def _jsonl(tmp_path: Path, text: str) -> Any:
    from readout_sdk.jsonl import objects

    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    return list(objects(path))


def _embeddings_of_two_scores() -> Any:
    from readout_sdk.results import Embeddings

    a = Embeddings(np.ones((1, 4), np.float32), True, "cosine")
    b = Embeddings(np.ones((1, 4), np.float32), False, "dot")
    return a.similarity(b)


def _overlay(decision: dict[str, Any], record: dict[str, Any]) -> Any:
    from readout_sdk.calibration import overlay

    return overlay(record, None, decision)


def _paired() -> Any:
    from readout_eval.paired import compare
    from readout_eval.tasks import Case

    cand = [Case(id=i, slices=[], prediction=0, gold=0, correct=True, value=1.0) for i in ("a", "b")]
    return compare(None, cand, cand[::-1], {}, {}, None)  # type: ignore[arg-type]


CASES: list[tuple[str, Callable[[Any], Any], type[BaseException], type[BaseException], str]] = [
    # (what, call, typed class, built-in base callers catch, what the message names)
    ("form width", lambda t: _form(width=0), FormError, ValueError, "width must be a positive integer"),
    ("form unknown field", lambda t: _form(colour="red"), FormError, ValueError, "unknown field 'colour'"),
    ("form ranges", lambda t: _form(precision="int8", ranges=[[0, 0, 0, 0], [-1, 1, 1, 1]]), FormError, ValueError,
     "minimum exceeds maximum at dimension 0"),
    ("vectors not 2-D", lambda t: __import__("readout_sdk.vector_forms", fromlist=["apply"]).apply(
        _form(), np.ones(4, np.float32)), FormError, ValueError, "2-D"),
    ("vectors of two scores", lambda t: _embeddings_of_two_scores(), FormError, ValueError,
     "cannot compare cosine embeddings with dot embeddings"),
    ("windows out of order", lambda t: _windows_out_of_order(), WindowError, ValueError,
     "are not full windows followed by one cut window"),
    ("no windows", lambda t: __import__("readout_sdk.windows", fromlist=["x"]).owned_rows([]), WindowError,
     ValueError, "no windows"),
    ("window direction", lambda t: __import__("readout_sdk.windows", fromlist=["x"]).source_positions(
        [object()], direction="up"), BadArgument, ValueError, "direction must be 'right' or 'left'"),
    ("batch size", lambda t: __import__("readout_sdk.batching", fromlist=["x"]).plan_batches([], 0, 100),
     BadArgument, ValueError, "batch_size must be at least 1"),
    ("positive int type", lambda t: __import__("readout_sdk.arguments", fromlist=["x"]).positive_int(
        "streams", "2"), WrongCall, TypeError, "streams must be a positive integer, got str"),
    ("a bare string", lambda t: __import__("readout_sdk.arguments", fromlist=["x"]).items("one text"),
     WrongCall, TypeError, "wrap it in a list"),
    ("aggregation", lambda t: __import__("readout_sdk.decode.tagging", fromlist=["x"]).decode_entities_many(
        [], [], [], "loudest"), BadArgument, ValueError, "aggregation must be one of"),
    ("score type", lambda t: __import__("readout_sdk.decode.scores", fromlist=["x"]).apply("tanh", np.zeros(2)),
     AbiError, ValueError, "unknown score type 'tanh'"),
    ("device", lambda t: __import__("readout_sdk.targets.devices", fromlist=["x"]).device("tpu"), UnknownName,
     KeyError, "unknown device 'tpu'; known: cpu"),
    ("backend", lambda t: __import__("readout_sdk.targets.backends", fromlist=["x"]).backend("tvm"), UnknownName,
     KeyError, "unknown backend 'tvm'; known:"),
    ("jsonl constant", lambda t: _jsonl(t, '{"x": NaN}\n'), InputRefused, ValueError,
     r"rows.jsonl:1: not valid JSON \(NaN: not a finite number\)"),
    ("jsonl array", lambda t: _jsonl(t, "[1]\n"), InputRefused, ValueError, "expected a JSON object, got list"),
    ("calibration keys", lambda t: _overlay({"loudness": 1}, {}), SdkError, ValueError,
     "not decision keys a calibration may set"),
    ("calibration of an old record", lambda t: _overlay({}, {"output": {}}), AbiError, ValueError,
     "no layered identity"),
    ("retrieval cost rows", lambda t: __import__("readout_parity.retrieval_cost", fromlist=["x"]).retrieval_cost(
        np.zeros((2, 2)), np.zeros((2, 2))), BadArgument, ValueError, "at least 3 rows"),
    ("retrieval cost NaN", lambda t: __import__("readout_parity.retrieval_cost", fromlist=["x"]).form_cost(
        np.array([[1.0, 0], [np.nan, 0], [0, 1]], np.float32), _form(width=2)), FormError, ValueError,
     "row 1 is not finite"),
    ("paired cases", lambda t: _paired(), InputRefused, ValueError, "not evaluated on the same cases"),
]


@pytest.mark.parametrize("what,call,typed,builtin,says", CASES, ids=[c[0] for c in CASES])
def test_a_caller_error_is_typed_and_keeps_its_builtin_base(tmp_path, what, call, typed, builtin, says):
    with pytest.raises(typed) as caught:
        call(tmp_path)
    e = caught.value
    assert isinstance(e, SdkError) and isinstance(e, builtin), type(e).__mro__
    assert re.search(says, str(e)), str(e)
    # printed as its message (a KeyError's own str would wrap it in quotes)
    assert not str(e).startswith(("'", '"'))


def test_exporter_refusals_are_readout_export_errors_with_their_builtin_base():
    """The exporter's refusals of what a family or plugin declares: exit 2, still a ValueError/KeyError."""
    torch = pytest.importorskip("torch")
    from readout_export.errors import ExportRefused, GraphError, NoModelClass, ReadoutExportError
    from readout_export.graph.readout import pool

    with pytest.raises(ExportRefused, match="unknown pooling mode 'median'") as caught:
        pool(torch.zeros(1, 2, 3), torch.ones(1, 2), torch.ones(1, 2), "median")
    assert isinstance(caught.value, ValueError) and caught.value.exit_code == 2
    assert issubclass(NoModelClass, KeyError) and issubclass(NoModelClass, ReadoutExportError)
    assert str(NoModelClass("bert has no AutoModelForX")) == "bert has no AutoModelForX"
    assert issubclass(GraphError, ValueError) and GraphError("x").exit_code == 1


def test_parity_error_is_an_sdk_error_and_still_a_runtime_error():
    from readout_parity import ParityError

    assert issubclass(ParityError, SdkError) and issubclass(ParityError, RuntimeError)
    assert issubclass(Closed, SdkError) and issubclass(Closed, RuntimeError)


def _plain_raises() -> list[str]:
    found = []
    for lib in LIBRARIES:
        for path in sorted((ROOT / lib).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            found += [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}" for m in PLAIN.finditer(text)]
    return found


def test_plain_raises_stay_few_in_the_libraries():
    """issue 46: at most 5 `raise ValueError/TypeError/KeyError/RuntimeError` in the four libraries; every
    other refusal a caller can cause is typed (see the cases above)."""
    plain = _plain_raises()
    assert len(plain) <= MAX_PLAIN, "\n".join(plain)


def test_the_plain_raise_count_sees_a_plain_raise():
    """The counter itself: it finds a plain raise (with or without arguments) and ignores typed ones."""
    sample = "def f():\n    raise ValueError('x')\n\ndef g():\n    raise KeyError\n\ndef h():\n    raise FormError('y')\n"
    assert [m.group(1) for m in PLAIN.finditer(sample)] == ["ValueError", "KeyError"]
