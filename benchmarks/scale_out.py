"""Throughput of each scale-out path against the SDK alone, side by side in one run:
`python benchmarks/scale_out.py [--items N] [--clients C] [--request-size R]`.

A benchmark, not a test. Every path runs the same artifact target (onnx-fp32 on ONNX Runtime) on the same
texts (the bench corpus, 8..148 tokens), so the ratios measure the path, not the model:

- SDK alone: `engine.embed(texts)` in one process (batch 32, sorted by length).
- `readout-export serve` (PyTriton): C client threads in this process send requests of R texts over
  gRPC to the server process; Triton's dynamic batcher merges them.
- `readout-export triton` repository on the tritonserver nvidia-pytriton bundles; the graph model runs on
  a Python stand-in with ONNX Runtime (the bundled server has no ONNX Runtime backend), the text model
  is the generated one (SDK tokenization + decisions, BLS to the graph model).
- `readout-export encode` (Ray Data, local cluster), 1 and 2 actors; time from reading to written Parquet
  (cluster start reported apart).
Results land in benchmarks/results/scale-out.{json,txt}.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the bundled-tritonserver launcher the tests use


def clients_run(url: str, model: str, requests: list[list[str]], clients: int) -> float:
    """Seconds for ``clients`` gRPC client threads to send every request (each waits for its reply)."""
    from helpers.triton_server import fan_out, infer

    def client(c: int) -> int:
        return sum(len(infer(url, model, {"text": requests[i]}, "grpc")) for i in range(c, len(requests), clients))

    t0 = time.perf_counter()
    outcomes = fan_out(client, clients)
    seconds = time.perf_counter() - t0
    assert sum(outcomes.values()) == sum(map(len, requests)), f"rows lost or a client failed: {outcomes}"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2048)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--request-size", type=int, default=16)
    parser.add_argument("--artifact", default=str(HERE / "dist" / "minilm"))
    args = parser.parse_args()

    import readout_sdk
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.families import get
    from helpers.triton_server import ServeProcess, TritonServer, stand_in_graph

    art = Path(args.artifact)
    texts = mixed_corpus(get("embedding"), args.items, seed=7)
    requests = [texts[i:i + args.request_size] for i in range(0, len(texts), args.request_size)]
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="scale-out-"))

    engine = readout_sdk.load(art, target="onnx-fp32", backend="onnxruntime")
    engine.embed(texts[:64])
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        engine.embed(texts)
        runs.append(time.perf_counter() - t0)
    sdk_s = statistics.median(runs)
    rows.append({"path": "SDK alone (engine.embed, one process)", "seconds": sdk_s})
    print(f"sdk: {len(texts) / sdk_s:.1f}/s", flush=True)
    del engine

    with ServeProcess(art, work / "serve.log", "--target", "onnx-fp32", "--backend", "onnxruntime") as served:
        clients_run(served.url("grpc"), "m", requests[:8], args.clients)  # warm
        s = statistics.median(clients_run(served.url("grpc"), "m", requests, args.clients) for _ in range(3))
        rows.append({"path": f"readout-export serve (PyTriton), {args.clients} gRPC clients x {args.request_size} texts",
                     "seconds": s})
        print(f"serve: {len(texts) / s:.1f}/s", flush=True)
        served.stop()

    repo = work / "repo"
    subprocess.run(["readout-export", "triton", str(art), "--repo", str(repo), "--name", "m"], check=True,
                   stdout=subprocess.DEVNULL)
    stand_in_graph(repo / "m_graph")
    with TritonServer(repo, work / "server") as server:
        clients_run(server.grpc_url, "m", requests[:8], args.clients)
        s = statistics.median(clients_run(server.grpc_url, "m", requests, args.clients) for _ in range(3))
        rows.append({"path": f"readout-export triton repo (graph on Python+ORT stand-in), {args.clients} gRPC clients",
                     "seconds": s})
        print(f"triton repo: {len(texts) / s:.1f}/s", flush=True)

    src = work / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    for actors in (1, 2):
        out = work / f"out{actors}"
        t0 = time.perf_counter()
        done = subprocess.run(["readout-export", "encode", str(art), "--input", str(src), "--output", str(out),
                               "--num-cpus", "2", "--actors", str(actors), "--target", "onnx-fp32",
                               "--backend", "onnxruntime", "--json"], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["rows"] == len(texts)
        rows.append({"path": f"readout-export encode (Ray Data, local 2 CPUs), {actors} actor(s)",
                     "seconds": result["seconds"], "wall_seconds_with_startup": wall})
        print(f"ray {actors}: {len(texts) / result['seconds']:.1f}/s", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    lines = [f"{len(texts)} texts (8..148 tokens), all-MiniLM-L6-v2 onnx-fp32 on ONNX Runtime; SDK, serve and "
             "repository rows: median of 3 passes after a warm-up; Ray rows: one pass each (its own cluster)",
             f"{'path':88s} {'items/s':>8s} {'x SDK':>6s}", "-" * 104]
    for r in rows:
        r["items_per_s"] = len(texts) / r["seconds"]
        r["x_sdk"] = sdk_s / r["seconds"]
        extra = (f"  (with Ray start-up: {len(texts) / r['wall_seconds_with_startup']:.1f}/s)"
                 if "wall_seconds_with_startup" in r else "")
        lines.append(f"{r['path']:88s} {r['items_per_s']:8.1f} {r['x_sdk']:5.2f}x{extra}")
    text = "\n".join(lines)
    print(text)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "scale-out.txt").write_text(text + "\n")
    (results / "scale-out.json").write_text(json.dumps({"items": len(texts), "clients": args.clients,
                                                        "request_size": args.request_size, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
