"""Build the benchmark artifacts and bench each one: `python benchmarks/run_all.py [--items N] [--repeats R]`.

A benchmark, not a test. Results land in benchmarks/results/ (NAME.json, NAME.png, NAME.txt, and
NAME.build.log: the build's log, with the budget search's measured frontier). Models: see prepare.py
(MiniLM and its two seeded heads are real-size; bert-base is BERT-base geometry with random weights).
The base-size model runs on fewer items by default (--base-items): it is about 8x MiniLM's work.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", default="512", help="corpus items for the MiniLM-size models")
    parser.add_argument("--base-items", default="128", help="corpus items for the base-size model")
    parser.add_argument("--repeats", default="5")
    parser.add_argument("--latency-items", default="64")
    parser.add_argument("--only", action="append",
                        help="bench only this artifact (minilm, bert-base, minilm-sentiment, minilm-ner); repeatable")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from prepare import selected

    results = HERE / "results"
    results.mkdir(exist_ok=True)
    for name, manifest in selected(args.only):
        print(f"building {name} (the budgeted target searches on a calibration corpus: minutes)", flush=True)
        subprocess.run(["readout-export", "build", str(manifest), "--force", "--quiet"], check=True)
        shutil.copyfile(HERE / "dist" / name / "build.log", results / f"{name}.build.log")
        items = args.base_items if name == "bert-base" else args.items
        done = subprocess.run(["readout-export", "bench", str(HERE / "dist" / name), "--items", items,
                               "--repeats", args.repeats, "--latency-items", args.latency_items, "--report", str(results / f"{name}.json"),
                               "--plot", str(results / f"{name}.png")], check=True, stdout=subprocess.PIPE,
                              text=True)  # stderr passes through: a failing bench says why
        (results / f"{name}.txt").write_text(done.stdout)
        print(done.stdout)


if __name__ == "__main__":
    main()
