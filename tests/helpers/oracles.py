"""Eager PyTorch references: each example alone, unpadded, fp32, straight from transformers or
sentence-transformers. Nothing here imports readout_export, so the exporter is checked against
independent code."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch


def _tokenizer(model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def _encode(tok, item: Any, max_length: int, strategy: str = "longest_first"):
    if isinstance(item, str):
        return tok(item, truncation=True, max_length=max_length, padding=False, return_tensors="pt",
                   return_special_tokens_mask=True)
    return tok(item[0], item[1], truncation=strategy, max_length=max_length, padding=False, return_tensors="pt",
               return_special_tokens_mask=True)


def _model_inputs(model, enc) -> dict[str, torch.Tensor]:
    keys = ["input_ids", "attention_mask"]
    if "token_type_ids" in enc and getattr(model.config, "type_vocab_size", 0) > 1:
        keys.append("token_type_ids")
    return {k: enc[k] for k in keys}


def transformers_outputs(family: str, model_dir: Path, items: Sequence[Any], max_length: int) -> list[dict[str, np.ndarray]]:
    """Head families: the transformers model's own outputs on each example alone."""
    import transformers

    auto = {"sequence_classification": ("AutoModelForSequenceClassification", {"logits": "logits"}),
            "multilabel_classification": ("AutoModelForSequenceClassification", {"logits": "logits"}),
            "regression": ("AutoModelForSequenceClassification", {"values": "logits"}),
            "cross_encoder": ("AutoModelForSequenceClassification", {"logits": "logits"}),
            "token_classification": ("AutoModelForTokenClassification", {"token_logits": "logits"}),
            "extractive_qa": ("AutoModelForQuestionAnswering", {"start_logits": "start_logits",
                                                                "end_logits": "end_logits"}),
            }[family]
    model = getattr(transformers, auto[0]).from_pretrained(str(model_dir)).eval()
    tok = _tokenizer(model_dir)
    strategy = "only_second" if family == "extractive_qa" else "longest_first"
    out = []
    with torch.no_grad():
        for item in items:
            enc = _encode(tok, item, max_length, strategy)
            res = model(**_model_inputs(model, enc))
            out.append({name: getattr(res, attr)[0].numpy() for name, attr in auto[1].items()})
    return out


def multiple_choice_outputs(model_dir: Path, items: Sequence[Any], max_length: int) -> list[dict[str, np.ndarray]]:
    """Each (question, choice) alone through AutoModelForMultipleChoice with one choice."""
    from transformers import AutoModelForMultipleChoice

    model = AutoModelForMultipleChoice.from_pretrained(str(model_dir)).eval()
    tok = _tokenizer(model_dir)
    out = []
    with torch.no_grad():
        for question, choices in items:
            scores = []
            for choice in choices:
                enc = _encode(tok, (question, choice), max_length)
                inputs = {k: v.unsqueeze(1) for k, v in _model_inputs(model, enc).items()}
                scores.append(float(model(**inputs).logits[0, 0]))
            out.append({"logits": np.array(scores, np.float32)})
    return out


def sentence_transformers_embeddings(model_dir: Path, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """SentenceTransformer.encode, one text per batch (no padding at all)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(list(texts), batch_size=1, convert_to_numpy=True)
    return [{"embeddings": v} for v in vectors]


def _each_alone(auto: str, model_dir: Path, items: Sequence[Any], max_length: int, read):
    """Run transformers ``auto`` model on each item alone; ``read(output, encoding)`` picks the result."""
    import transformers

    model = getattr(transformers, auto).from_pretrained(str(model_dir)).eval()
    tok = _tokenizer(model_dir)
    with torch.no_grad():
        return [read(model(**_model_inputs(model, enc)), enc)
                for enc in (_encode(tok, item, max_length) for item in items)]


def hidden_rows(model_dir: Path, items: Sequence[Any], max_length: int):
    """(last_hidden_state rows, special-token mask) per example alone, from transformers AutoModel."""
    return _each_alone("AutoModel", model_dir, items, max_length,
                       lambda out, enc: (out.last_hidden_state[0].numpy(),
                                         enc["special_tokens_mask"][0].numpy().astype(bool)))


def pool_numpy(h: np.ndarray, keep: np.ndarray, mode: str) -> np.ndarray:
    """Pooling written directly from the definitions in readout-contract 0x03."""
    rows = h[keep]
    if mode == "mean":
        return rows.mean(0)
    if mode == "max":
        return rows.max(0)
    if mode == "first_valid":
        return rows[0]
    if mode == "last_token":
        return rows[-1]
    if mode == "cls":
        return h[0]
    if mode == "mean_sqrt_len":
        return rows.sum(0) / np.sqrt(len(rows))
    if mode == "weighted_mean":
        w = np.arange(1, len(rows) + 1, dtype=np.float64)[:, None]
        return (rows * w).sum(0) / w.sum()
    raise ValueError(mode)


def late_interaction_outputs(model_dir: Path, texts: Sequence[str], max_length: int, content: bool):
    """Backbone rows -> the saved Dense weights -> per-row L2; rows outside the readout are zero."""
    from safetensors.numpy import load_file

    dense = load_file(str(model_dir / "1_Dense" / "model.safetensors"))
    w = dense["linear.weight"]
    out = []
    for h, special in hidden_rows(model_dir, texts, max_length):
        v = h @ w.T
        v = v / np.linalg.norm(v, axis=-1, keepdims=True)
        keep = ~special if content else np.ones(len(h), bool)
        out.append({"token_vectors": v * keep[:, None], "token_mask": keep.astype(np.int64)})
    return out


def splade_outputs(model_dir: Path, texts: Sequence[str], max_length: int):
    """SPLADE: max over rows of log(1 + relu(MLM logits)), each text alone."""
    return _each_alone("AutoModelForMaskedLM", model_dir, texts, max_length,
                       lambda out, enc: {"sparse_weights": torch.log1p(torch.relu(out.logits[0])).max(0).values.numpy()})
