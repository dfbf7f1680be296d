"""`readout-export serve-http` under load, next to the SDK called directly, side by side in one run:
`python benchmarks/http_load.py [--artifact DIR] [--clients 64] [--seconds 20] [--request-size 4]`.

A benchmark, not a test (loopback only, bounded in time and count). Same artifact, target (onnx-fp32 on
ONNX Runtime) and texts (the bench corpus, 8..148 tokens) for every phase:

1. SDK alone, in this process, two ways (median of 3 runs each): `engine.embed(texts, batch_size=32)` over
   the whole corpus at once (sorted by length globally: its best case), and calls of 32 texts each
   (`engine.embed(texts[i:i + 32])`, as an application batching 32 at a time calls it).
2. Throughput: C concurrent clients (one asyncio loop, aiohttp) each send requests of R texts to
   `/v1/embeddings` (base64, as the openai client asks) for S seconds against the server's defaults;
   items/s, p50/p99 latency, and every answer checked against the SDK's vectors (lost = an exception,
   mismatched = any vector off by more than 1e-5).
3. Overload: the same clients against a server with a small queue (--max-queue-items 32): every answer
   must be a correct 200 or a 429/503 with Retry-After; counts reported.
4. Restart: the server is killed (SIGKILL) mid-load, started again, and must answer correctly.

Both share this machine's CPUs with the clients (on 2 cores the load generator takes a share the SDK
alone does not pay). Results: benchmarks/results/http-load.{json,txt}.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the serve-http launcher the tests use


async def load(url: str, requests: list[list[str]], clients: int, seconds: float, want: dict[str, np.ndarray],
               stop_after: float | None = None) -> dict:
    """C clients send ``requests`` round-robin for ``seconds``; statuses, latencies, items, mismatches."""
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counts = {"items": 0, "lost": 0, "mismatched": 0, "retry_after_missing": 0}
    end = time.perf_counter() + seconds

    async def client(c: int, session: aiohttp.ClientSession) -> None:
        k = c
        while time.perf_counter() < end:
            batch = requests[k % len(requests)]
            k += clients
            t0 = time.perf_counter()
            try:
                async with session.post(url + "/v1/embeddings", json={"model": "m", "input": batch,
                                                                       "encoding_format": "base64"}) as r:
                    doc = await r.json(content_type=None)
                    status = r.status
                    retry = r.headers.get("Retry-After")
            except Exception:
                counts["lost"] += 1
                if stop_after is not None:
                    await asyncio.sleep(0.05)
                continue
            latencies.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                got = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in doc["data"]]
                if len(got) != len(batch) or any(np.abs(g - want[t]).max() > 1e-5 for g, t in zip(got, batch)):
                    counts["mismatched"] += 1
                counts["items"] += len(batch)
            elif status in (429, 503) and retry is None:
                counts["retry_after_missing"] += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, session) for c in range(clients)))
        elapsed = time.perf_counter() - t0
    lat = sorted(latencies) or [float("nan")]
    return {"seconds": elapsed, "items_per_s": counts["items"] / elapsed, "statuses": statuses, **counts,
            "p50_ms": 1000 * lat[len(lat) // 2], "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", default=str(HERE / "dist" / "minilm"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--request-size", type=int, default=4)
    parser.add_argument("--items", type=int, default=2000, help="distinct texts")
    args = parser.parse_args()

    import readout_sdk
    from helpers.http_server import HttpServer
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.families import get

    texts = mixed_corpus(get("embedding"), args.items, seed=7)
    engine = readout_sdk.load(args.artifact, target="onnx-fp32")
    engine.embed(texts[:64])
    runs, chunked = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        vectors = engine.embed(texts, batch_size=32).vectors
        runs.append(len(texts) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        for i in range(0, len(texts), 32):
            engine.embed(texts[i:i + 32])
        chunked.append(len(texts) / (time.perf_counter() - t0))
    want = dict(zip(texts, vectors))
    engine.close()
    sdk, sdk32 = statistics.median(runs), statistics.median(chunked)
    requests = [texts[i:i + args.request_size] for i in range(0, len(texts), args.request_size)]
    spec = [f"m={args.artifact}"]
    target = ("--target", "onnx-fp32")

    with HttpServer(spec, *target) as s:
        asyncio.run(load(s.url, requests, args.clients, 2.0, want))  # warm the connections
        steady = asyncio.run(load(s.url, requests, args.clients, args.seconds, want))
    with HttpServer(spec, *target, "--max-queue-items", "32") as s:
        overload = asyncio.run(load(s.url, requests, args.clients, args.seconds / 2, want))
    with HttpServer(spec, *target) as s:
        async def killed() -> dict:
            task = asyncio.create_task(load(s.url, requests, args.clients, 4.0, want, stop_after=1.0))
            await asyncio.sleep(1.5)
            s.process.kill()
            return await task
        during = asyncio.run(killed())
        s.process.wait()
    with HttpServer(spec, *target) as s:
        after = asyncio.run(load(s.url, requests, 8, 3.0, want))

    result = {"sdk_items_per_s": sdk, "sdk_runs": runs, "sdk_calls_of_32_items_per_s": sdk32, "sdk_calls_of_32_runs": chunked,
              "steady": steady, "overload": overload,
              "killed_mid_load": during, "after_restart": after, "clients": args.clients,
              "request_size": args.request_size, "texts": len(texts)}
    lines = [
        f"SDK alone, whole corpus:  {sdk:8.1f} items/s (runs {', '.join(f'{r:.1f}' for r in runs)})",
        f"SDK alone, calls of 32:   {sdk32:8.1f} items/s (runs {', '.join(f'{r:.1f}' for r in chunked)})",
        f"serve-http, {args.clients} clients:  {steady['items_per_s']:8.1f} items/s = {steady['items_per_s'] / sdk:.2f}x the SDK "
        f"(whole corpus), {steady['items_per_s'] / sdk32:.2f}x (calls of 32); "
        f"p50 {steady['p50_ms']:.0f} ms, p99 {steady['p99_ms']:.0f} ms; statuses {steady['statuses']}; "
        f"lost {steady['lost']}, mismatched {steady['mismatched']}",
        f"overload (queue 32):      statuses {overload['statuses']}; lost {overload['lost']}, mismatched "
        f"{overload['mismatched']}, 429/503 without Retry-After {overload['retry_after_missing']}",
        f"killed mid-load:          {during['statuses']} answered before the kill; {during['lost']} attempts failed "
        "after it (nothing listening)",
        f"after restart:            statuses {after['statuses']}; mismatched {after['mismatched']}, lost {after['lost']}",
    ]
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "http-load.json").write_text(json.dumps(result, indent=2, default=str))
    (out / "http-load.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
