"""Artifacts shared by the SDK tests, built once per session (REAL MiniLM and SPLADE-tiny; the rest
SYNTHETIC, see tests/helpers/synthetic.py)."""
from __future__ import annotations

import json
from pathlib import Path

from helpers import synthetic

SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]

SPECS = {
    "embedding": (lambda d: synthetic.minilm_path(), {"family": "embedding", "max_length": 256, "targets": [
        {"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "int8"},
        {"format": "onnx", "precision": "bf16"}, {"format": "onnx", "precision": "int8", "runtime": "openvino"}]}),
    "fp16": (lambda d: synthetic.minilm_path(), {"family": "embedding", "max_length": 256, "targets": [
        {"format": "onnx", "precision": "fp32"}, {"format": "tensorrt", "precision": "fp16",
                                                   "profile": {"batch": [1, 16, 64]}}]}),
    "classify": (lambda d: synthetic.make_model("bert", "sequence_classification", d, labels=SENTIMENT),
                 {"family": "sequence_classification"}),
    "multilabel": (lambda d: synthetic.make_model("roberta", "multilabel_classification", d,
                                                  labels=["toxic", "spam", "urgent"],
                                                  problem_type="multi_label_classification"),
                   {"family": "multilabel_classification", "thresholds": [0.5, 0.45, 0.55]}),
    "regression": (lambda d: synthetic.make_model("distilbert", "regression", d, problem_type="regression",
                                                  num_labels=2),
                   {"family": "regression", "labels": ["valence", "arousal"]}),
    "tag-bert": (lambda d: synthetic.make_model("bert", "token_classification", d, labels=TAGS),
                 {"family": "token_classification"}),
    "tag-xlmr": (lambda d: synthetic.make_model("xlm-roberta", "token_classification", d, labels=TAGS),
                 {"family": "token_classification"}),
    "qa": (lambda d: synthetic.make_model("bert", "extractive_qa", d), {"family": "extractive_qa", "max_length": 48, "stride": 12}),
    "qa-null": (lambda d: synthetic.make_model("roberta", "extractive_qa", d, seed=5),
                {"family": "extractive_qa", "null_policy": "cls"}),
    "cross": (lambda d: synthetic.make_model("bert", "cross_encoder", d, num_labels=1),
              {"family": "cross_encoder", "score_type": "sigmoid"}),
    "sparse": (lambda d: Path(__import__("cognition").__file__).parent / "model", {"family": "sparse"}),
    "choice": (lambda d: synthetic.make_model("bert", "multiple_choice", d), {"family": "multiple_choice"}),
    "late": (lambda d: synthetic.make_late_model(d), {"family": "late_interaction", "readout": {"rows": "content"}}),
    # a declared 128-wide float32 form too (Matryoshka prefix): what OpenAI's `dimensions` picks over HTTP
    "roles": (lambda d: synthetic.make_role_model(d, include_prompt=False),
              {"family": "embedding", "vectors": {"widths": [128]}}),
}


def build_shared(key: str, root: Path) -> tuple[Path, Path]:
    """(model_dir, artifact_dir) for ``key`` under ``root``."""
    from readout_export.build import build

    make, manifest = SPECS[key]
    model = make(root / "model")
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
           **manifest}
    (root / "manifest.json").write_text(json.dumps(doc))
    return model, build(root / "manifest.json").output_dir
