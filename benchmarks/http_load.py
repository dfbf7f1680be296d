"""`readout-export serve-http` under load, next to the SDK called directly, side by side in one run:
`python benchmarks/http_load.py [--artifact DIR] [--clients 64] [--seconds 15] [--request-size 4] [--large 400]`.

A benchmark, not a test (loopback only, bounded in time and count). Same artifact, target (onnx-fp32 on
ONNX Runtime) and texts (the bench corpus, 8..148 tokens) for every phase:

1-2. Throughput, 3 rounds side by side (the SDK in this process, then the server, in each round; the
   ratio is taken per round, then its median and range): the SDK two ways, `engine.embed(texts,
   batch_size=32)` over the whole corpus at once (sorted by length globally: its best case) and calls of
   32 texts each (`engine.embed(texts[i:i + 32])`, as an application batching 32 at a time calls it);
   then the same corpus through the server: C concurrent clients (one asyncio loop, aiohttp) each take
   the next request of R texts when their last one is answered, sent to `/v1/embeddings` (base64, as the
   openai client asks), timed from the first request to the last answer: the same work the SDK did.
   Every answer is checked against the SDK's vectors (lost = an exception, mismatched = any vector off
   by more than 1e-5). A time window would count the inputs of requests still half served when it
   closes as not done, and a fair scheduler keeps many of them in flight.
3. Overload: the same clients against a server with a small queue (--max-queue-items 32): every answer
   must be a correct 200 or a 429/503 with Retry-After; counts reported.
4. Restart: the server is killed (SIGKILL) mid-load, started again, and must answer correctly.
5. Fairness (3 runs, medians and ranges): one client sends 1-input requests one after another, alone, then
   while another client's L-input request (``--large``, 400) runs; p50/p99 latency of the 1-input requests
   each way, and the large request's own time alone and beside them. The server cuts the large request into
   batches of ``--max-batch-items``, so a small request waits at most for the batch in flight.

Both share this machine's CPUs with the clients (on 2 cores the load generator takes a share the SDK
alone does not pay). Results: benchmarks/results/http-load.{json,txt}.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
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


async def drain(url: str, requests: list[list[str]], clients: int, want: dict[str, np.ndarray]) -> dict:
    """C clients share ``requests``, each sending the next one when its last is answered, until none is
    left: the whole corpus's items/s (first request to last answer), statuses, latencies, mismatches."""
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counts = {"items": 0, "lost": 0, "mismatched": 0}
    queue = iter(requests)

    async def client(session: aiohttp.ClientSession) -> None:
        for batch in queue:  # one shared iterator: each request is sent once, by whichever client is free
            try:
                seconds, ok, status = await post(session, url, batch, want)
            except Exception:
                counts["lost"] += 1
                continue
            latencies.append(seconds)
            statuses[status] = statuses.get(status, 0) + 1
            counts["items"] += len(batch) if status == 200 else 0
            counts["mismatched"] += status == 200 and not ok

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        elapsed = time.perf_counter() - t0
    return {"seconds": elapsed, "items_per_s": counts["items"] / elapsed, "statuses": statuses, **counts,
            **{k: v for k, v in percentiles(latencies).items() if k != "n"}}


async def post(session, url: str, batch: list[str], want: dict[str, np.ndarray]) -> tuple[float, bool, int]:
    """One request's latency, whether its answer is a 200 equal to the SDK's vectors, and its status."""
    t0 = time.perf_counter()
    async with session.post(url + "/v1/embeddings", json={"model": "m", "input": batch,
                                                           "encoding_format": "base64"}) as r:
        doc = await r.json(content_type=None)
        status = r.status
    seconds, ok = time.perf_counter() - t0, status == 200
    if ok:
        got = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in doc["data"]]
        ok = len(got) == len(batch) and all(np.abs(g - want[t]).max() <= 1e-5 for g, t in zip(got, batch))
    return seconds, ok, status


def percentiles(latencies: list[float]) -> dict:
    lat = sorted(latencies) or [float("nan")]
    return {"n": len(latencies), "p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


async def fairness(url: str, texts: list[str], large: int, want: dict[str, np.ndarray], alone: int = 30) -> dict:
    """1-input requests one after another: alone, then while another client's ``large``-input request runs
    (they start once it is queued, and stop when it is answered); the large request's time alone and beside."""
    import aiohttp

    big, small = texts[:large], texts[large:]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        solo = [await post(session, url, [small[k % len(small)]], want) for k in range(alone)]
        big_alone = await post(session, url, big, want)
        running = asyncio.create_task(post(session, url, big, want))
        await asyncio.sleep(0.2)  # the large request is read, prepared and queued first
        beside = []
        while not running.done():
            beside.append(await post(session, url, [small[len(beside) % len(small)]], want))
        big_beside = await running
    wrong = sum(not ok for _, ok, _ in solo + beside + [big_alone, big_beside])
    return {"alone": percentiles([t for t, _, _ in solo]), "beside_large": percentiles([t for t, _, _ in beside]),
            "large_alone_s": big_alone[0], "large_beside_s": big_beside[0], "wrong": wrong}


def spread(values: list[float], fmt: str = "{:.0f}") -> str:
    """The median, and the range of the runs."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def fairness_lines(runs: list[dict], large: int) -> list[str]:
    """The fairness phase in words: medians of the runs, with their ranges."""
    def of(path: str) -> list[float]:
        where, key = path.split(".") if "." in path else (None, path)
        return [r[where][key] if where else r[key] for r in runs]
    quarter = [r["beside_large"]["p99_ms"] / (1000 * r["large_alone_s"]) for r in runs]
    return [
        f"1-input requests alone:   p50 {spread(of('alone.p50_ms'))} ms, p99 {spread(of('alone.p99_ms'))} ms "
        f"(median of 3 runs, range; {runs[0]['alone']['n']} requests each)",
        f"  beside a {large}-input request: p50 {spread(of('beside_large.p50_ms'))} ms, "
        f"p99 {spread(of('beside_large.p99_ms'))} ms ({', '.join(str(n) for n in of('beside_large.n'))} requests); "
        f"p99 = {spread(quarter, '{:.3f}')} of the large request's own time",
        f"  the {large}-input request: {spread(of('large_alone_s'), '{:.2f}')} s alone, "
        f"{spread(of('large_beside_s'), '{:.2f}')} s beside them; wrong answers {sum(of('wrong')):.0f}",
    ]


def sdk_round(engine, texts: list[str]) -> tuple[float, float]:
    """The SDK's items/s over ``texts``: in one call, and in calls of 32."""
    t0 = time.perf_counter()
    engine.embed(texts, batch_size=32)
    whole = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(0, len(texts), 32):
        engine.embed(texts[i:i + 32])
    return whole, len(texts) / (time.perf_counter() - t0)


def served(args: argparse.Namespace, texts: list[str], engine) -> dict:
    """Every phase against fresh servers on the same artifact and target; ``engine``: the SDK's, in this
    process (its vectors are what every answer is checked against)."""
    from helpers.http_server import HttpServer

    want = dict(zip(texts, engine.embed(texts, batch_size=32).vectors))
    requests = [texts[i:i + args.request_size] for i in range(0, len(texts), args.request_size)]
    spec, target = [f"m={args.artifact}"], ("--target", "onnx-fp32")
    out: dict = {"sdk_runs": [], "sdk_calls_of_32_runs": [], "steady_runs": []}
    with HttpServer(spec, *target) as s:
        asyncio.run(load(s.url, requests, args.clients, 2.0, want))  # warm the connections
        for _ in range(3):  # side by side: the SDK, then the server, on one machine state
            whole, chunked = sdk_round(engine, texts)
            out["sdk_runs"].append(whole)
            out["sdk_calls_of_32_runs"].append(chunked)
            out["steady_runs"].append(asyncio.run(drain(s.url, requests, args.clients, want)))
        out["fairness"] = [asyncio.run(fairness(s.url, texts, args.large, want)) for _ in range(3)]
    with HttpServer(spec, *target, "--max-queue-items", "32") as s:
        out["overload"] = asyncio.run(load(s.url, requests, args.clients, args.seconds / 2, want))
    with HttpServer(spec, *target) as s:
        async def killed() -> dict:
            task = asyncio.create_task(load(s.url, requests, args.clients, 4.0, want, stop_after=1.0))
            await asyncio.sleep(1.5)
            s.process.kill()
            return await task
        out["killed_mid_load"] = asyncio.run(killed())
        s.process.wait()
    with HttpServer(spec, *target) as s:
        out["after_restart"] = asyncio.run(load(s.url, requests, 8, 3.0, want))
    return out


def report(r: dict, clients: int, large: int) -> list[str]:
    """The result in words, one line a measure."""
    sdk, sdk32, steady = r["sdk_items_per_s"], r["sdk_calls_of_32_items_per_s"], r["steady"]
    overload, during, after = r["overload"], r["killed_mid_load"], r["after_restart"]
    return [
        f"SDK alone, whole corpus:  {sdk:8.1f} items/s (runs {', '.join(f'{x:.1f}' for x in r['sdk_runs'])})",
        f"SDK alone, calls of 32:   {sdk32:8.1f} items/s (runs {', '.join(f'{x:.1f}' for x in r['sdk_calls_of_32_runs'])})",
        f"serve-http, {clients} clients:  {steady['items_per_s']:8.1f} items/s = {spread(r['steady_over_sdk'], '{:.2f}')}x "
        f"the SDK in one call, {spread(r['steady_over_sdk_calls_of_32'], '{:.2f}')}x in calls of 32 (per round; "
        "median of 3 rounds, range); "
        f"p50 {steady['p50_ms']:.0f} ms, p99 {steady['p99_ms']:.0f} ms; statuses {steady['statuses']}; "
        f"lost {steady['lost']}, mismatched {steady['mismatched']}",
        *fairness_lines(r["fairness"], large),
        f"overload (queue 32):      statuses {overload['statuses']}; lost {overload['lost']}, mismatched "
        f"{overload['mismatched']}, 429/503 without Retry-After {overload['retry_after_missing']}",
        f"killed mid-load:          {during['statuses']} answered before the kill; {during['lost']} attempts failed "
        "after it (nothing listening)",
        f"after restart:            statuses {after['statuses']}; mismatched {after['mismatched']}, lost {after['lost']}",
        f"load average (1 min) at start, end: {r['load_before'][0]:.2f}, {r['load_after'][0]:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", default=str(HERE / "dist" / "minilm"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15.0, help="the overload phase runs half of it")
    parser.add_argument("--request-size", type=int, default=4)
    parser.add_argument("--items", type=int, default=2000, help="distinct texts")
    parser.add_argument("--large", type=int, default=400, help="inputs of the large request (fairness phase)")
    args = parser.parse_args()

    import readout_sdk
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.families import get

    load_before = os.getloadavg()  # the machine may be shared: the numbers are read against its load
    texts = mixed_corpus(get("embedding"), args.items, seed=7)
    with readout_sdk.load(args.artifact, target="onnx-fp32") as engine:
        engine.embed(texts[:64])  # warm
        phases = served(args, texts, engine)
    runs, chunked, steady = phases["sdk_runs"], phases["sdk_calls_of_32_runs"], phases["steady_runs"]
    result = {"sdk_items_per_s": statistics.median(runs), "sdk_calls_of_32_items_per_s": statistics.median(chunked),
              **phases, "steady": sorted(steady, key=lambda x: x["items_per_s"])[1],  # the median run
              "steady_over_sdk": [x["items_per_s"] / sdk for x, sdk in zip(steady, runs)],
              "steady_over_sdk_calls_of_32": [x["items_per_s"] / sdk for x, sdk in zip(steady, chunked)],
              "clients": args.clients, "request_size": args.request_size, "texts": len(texts), "large": args.large,
              "load_before": load_before, "load_after": os.getloadavg()}
    lines = report(result, args.clients, args.large)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "http-load.json").write_text(json.dumps(result, indent=2, default=str))
    (out / "http-load.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
