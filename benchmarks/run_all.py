"""Build the benchmark artifacts and bench each one: `python benchmarks/run_all.py [--items N] [--repeats R]`.

A benchmark, not a test. Results land in benchmarks/results/ (NAME.json, NAME.png, NAME.txt).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", default="512")
    parser.add_argument("--repeats", default="5")
    parser.add_argument("--only", help="bench only this artifact name (minilm, minilm-sentiment, minilm-ner)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from prepare import main as prepare

    results = HERE / "results"
    results.mkdir(exist_ok=True)
    for manifest in prepare():
        name = manifest.name.split(".")[0]
        if args.only and name != args.only:
            continue
        subprocess.run(["readout-export", "build", str(manifest), "--force", "--quiet"], check=True)
        done = subprocess.run(["readout-export", "bench", str(HERE / "dist" / name), "--items", args.items,
                               "--repeats", args.repeats, "--json", str(results / f"{name}.json"),
                               "--plot", str(results / f"{name}.png")], check=True, capture_output=True, text=True)
        (results / f"{name}.txt").write_text(done.stdout)
        print(done.stdout)


if __name__ == "__main__":
    main()
