"""Write a tiny demo model and manifest for every family under examples/demo/<family>/, so that each
app in examples/apps/ can be run end to end without downloading anything.

The demo models are SYNTHETIC: random weights, so their labels and answers are meaningless; they show
the workflow and the typed results, not quality. For real models, point a manifest at your own
save_pretrained / sentence-transformers directory. (Needs the export extra and the test helpers.)

    python examples/demo_models.py && readout-export build examples/demo/tag/manifest.json --force \
        && python examples/apps/tag.py examples/demo/tag/dist
"""
import json
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "tests"))
import synthetic  # noqa: E402  (tiny seeded models and tokenizers)

DEMOS = {
    "classify": ("sequence_classification", dict(labels=["negative", "neutral", "positive"]), {}),
    "tag": ("token_classification", dict(labels=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]), {}),
    "answer": ("extractive_qa", {}, {"null_policy": "none"}),
    "rerank": ("cross_encoder", dict(num_labels=1), {"score_type": "sigmoid"}),
    "choose": ("multiple_choice", {}, {}),
}
for name, (family, model_kwargs, extra) in DEMOS.items():
    root = here / "demo" / name
    if not (root / "model").exists():
        synthetic.make_model("bert", family, root / "model", **model_kwargs)
    manifest = {"schema": "readout-export/manifest/1", "name": f"demo-{name}", "model": "model", "family": family,
                "output_dir": "dist", **extra}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(root / "manifest.json")
