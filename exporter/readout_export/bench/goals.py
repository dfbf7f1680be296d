"""The performance goals, decided from rows measured side by side in one run (ratios, never single figures)."""
from __future__ import annotations

from typing import Any

from readout_sdk.families import get

HIGH, GOOD = 0.9999, 0.99  # parity classes: min cosine for embeddings, decision agreement otherwise


def _parity(row: dict[str, Any]) -> float | None:
    p = row.get("parity") or {}
    if "min_cosine" in p:
        return p["min_cosine"]
    if "decision_agreement" in p:
        return p["decision_agreement"]
    return 1.0 if row["kind"] == "eager" else None


def _fastest(rows: list[dict[str, Any]], kinds: tuple[str, ...], at_least: float | None = None,
             precision: str | None = None) -> dict[str, Any] | None:
    pool = [r for r in rows if r["kind"] in kinds and r.get("items_per_s")
            and (at_least is None or (_parity(r) or 0.0) >= at_least)
            and (precision is None or r["precision"] == precision)]
    return max(pool, key=lambda r: r["items_per_s"]) if pool else None


def _goal(name: str, requirement: str, ratio: float | None, need: float, detail: str, reason: str = "") -> dict:
    if ratio is None:
        return {"goal": name, "requirement": requirement, "measured": None, "decision": "NOT_EVALUATED",
                "detail": reason}
    return {"goal": name, "requirement": requirement, "measured": round(ratio, 3),
            "decision": "PASS" if ratio >= need else "FAIL", "detail": detail}


def decide(rows: list[dict[str, Any]], machine: dict[str, Any], family: str) -> list[dict[str, Any]]:
    """One entry per goal of the performance issue: PASS, FAIL, or NOT_EVALUATED with the reason."""
    metric = get(family).bench_metric.replace("_", " ")
    eager = _fastest(rows, ("eager",))
    goals = []
    for level, need_peer, need_eager in ((HIGH, 1.2, 2.4), (GOOD, None, 3.0)):
        sdk = _fastest(rows, ("sdk",), level)
        peer = _fastest(rows, ("peer", "eager"), level)
        label = f"fastest SDK at {metric} >= {level}"
        if need_peer is not None:
            goals.append(_goal(f"{label} vs fastest peer at the same parity", f">= {need_peer}x",
                               sdk and peer and sdk["items_per_s"] / peer["items_per_s"], need_peer,
                               f"{sdk and sdk['name']} vs {peer and peer['name']}",
                               "no SDK or no peer configuration reached that parity"))
        goals.append(_goal(f"{label} vs eager PyTorch", f">= {need_eager}x",
                           sdk and eager and sdk["items_per_s"] / eager["items_per_s"], need_eager,
                           f"{sdk and sdk['name']} vs {eager and eager['name']}",
                           "no SDK configuration reached that parity"))
    sdk32 = _fastest(rows, ("sdk",), None, "fp32")
    peer32 = _fastest(rows, ("peer", "eager"), None, "fp32")
    peak = machine.get("gemm_peak_gflops", {}).get("fp32")
    share = f"; SDK fp32 reaches {sdk32['gflops'] / peak:.0%} of the fp32 GEMM peak" if (
        sdk32 and sdk32.get("gflops") and peak) else ""
    goals.append(_goal("fp32: fastest SDK vs fastest fp32 peer", ">= 1.1x",
                       sdk32 and peer32 and sdk32["items_per_s"] / peer32["items_per_s"], 1.1,
                       f"{sdk32 and sdk32['name']} vs {peer32 and peer32['name']}{share}", "no fp32 rows"))
    lat_sdk = min((r for r in rows if r["kind"] == "sdk" and r.get("p50_ms") and (_parity(r) or 0) >= HIGH),
                  key=lambda r: r["p50_ms"], default=None)
    # the baseline: eager sentence-transformers where it applies (embeddings), else eager PyTorch
    st = [r for r in rows if r["name"] == "sentence-transformers backend=torch" and r.get("p50_ms")]
    lat_eager = st[0] if st else min((r for r in rows if r["kind"] == "eager" and r.get("p50_ms")),
                                     key=lambda r: r["p50_ms"], default=None)
    graph = next((r for r in rows if r["name"] == "eager PyTorch (readout graph)" and r.get("p50_ms")), None)
    also = f"; vs eager PyTorch (readout graph) {graph['p50_ms'] / lat_sdk['p50_ms']:.2f}x" if (
        graph and lat_sdk and graph is not lat_eager) else ""
    goals.append(_goal("batch-1 p50 latency: eager / SDK", ">= 1.43x (SDK <= 0.7x eager)",
                       lat_sdk and lat_eager and lat_eager["p50_ms"] / lat_sdk["p50_ms"], 1 / 0.7,
                       f"{lat_sdk and lat_sdk['name']} {lat_sdk and round(lat_sdk['p50_ms'], 2)} ms vs "
                       f"{lat_eager and lat_eager['name']} {lat_eager and round(lat_eager['p50_ms'], 2)} ms{also}",
                       "no latency rows"))
    imp = machine.get("sdk_import_s")
    goals.append(_goal("SDK import time", "<= 0.3 s", imp and 0.3 / imp, 1.0, f"{imp and round(imp, 3)} s",
                       "not measured"))
    rss_sdk, rss_eager = machine.get("sdk_peak_rss_mb"), machine.get("eager_peak_rss_mb")
    goals.append(_goal("peak RSS: eager process / SDK process", ">= 2x",
                       rss_sdk and rss_eager and rss_eager / rss_sdk, 2.0,
                       f"SDK {rss_sdk and round(rss_sdk)} MiB vs eager {rss_eager and round(rss_eager)} MiB",
                       "not measured"))
    return goals
