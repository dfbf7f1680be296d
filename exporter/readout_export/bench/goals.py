"""The performance goals and the tier table, decided from rows measured side by side in one run (ratios
of configurations measured together, never single figures)."""
from __future__ import annotations

from typing import Any

from readout_sdk.families import get

TIER_GOAL = {2: 1.3}  # tier index -> the ratio it needs (default 1.0: never behind the fastest peer)
BF16_PEAK_SHARE = 0.85
OWN_WORK = 0.03
COLD_START_S = 1.0


def parity_of(row: dict[str, Any], family: str) -> float | None:
    """A row's value of its family's bench metric (the family says which: ``bench_metric``): the lower of
    the bench corpus's and the parity corpus's (a tier is claimed on both, for peers as for the SDK); eager
    rows are the reference: 1. A row that did not measure the family's metric has no parity (never passes)."""
    metric = get(family).bench_metric
    values = [(row.get(key) or {}).get(metric) for key in ("parity", "parity_corpus")]
    present = [v for v in values if v is not None]
    if present:
        return min(present)
    return 1.0 if row["kind"] == "eager" else None


def fastest(rows: list[dict[str, Any]], family: str, kinds: tuple[str, ...], at_least: float | None = None,
            precision: str | None = None) -> dict[str, Any] | None:
    """The row of these kinds with the most items/s among those reaching ``at_least`` parity."""
    pool = [r for r in rows if r["kind"] in kinds and r.get("items_per_s")
            and (at_least is None or (parity_of(r, family) or 0.0) >= at_least)
            and (precision is None or r["precision"] == precision)]
    return max(pool, key=lambda r: r["items_per_s"]) if pool else None


def tiers(rows: list[dict[str, Any]], family: str,
          matches: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One entry per parity tier: the fastest SDK and peer rows reaching it, their ratio and peak shares.
    The rows pick the finalists; where the two were also timed head to head (``matches``, from
    `measure.head_to_head`), that match's ratio is the tier's (``ratio_rows`` keeps the rows' own)."""
    played = {(m["sdk"], m["peer"]): m for m in matches or []}
    out = []
    for i, level in enumerate(get(family).bench_tiers):
        sdk, peer = fastest(rows, family, ("sdk",), level), fastest(rows, family, ("peer", "eager"), level)
        by_rows = sdk["items_per_s"] / peer["items_per_s"] if sdk and peer else None
        match = played.get((sdk["name"], peer["name"])) if sdk and peer else None
        out.append({"tier": level, "need": TIER_GOAL.get(i, 1.0),
                    "sdk": sdk and _brief(sdk, family), "peer": peer and _brief(peer, family),
                    "ratio": match["ratio"] if match else by_rows, "ratio_rows": by_rows, "head_to_head": match})
    return out


def finalists(rows: list[dict[str, Any]], family: str) -> list[tuple[str, str]]:
    """The (SDK, peer) pairs the tiers put against each other, each once, in tier order."""
    pairs = [(t["sdk"]["name"], t["peer"]["name"]) for t in tiers(rows, family) if t["sdk"] and t["peer"]]
    return list(dict.fromkeys(pairs))


def _brief(row: dict[str, Any], family: str) -> dict[str, Any]:
    return {"name": row["name"], "items_per_s": row["items_per_s"], "parity": parity_of(row, family),
            "peak": row.get("peak"), "peak_fraction": row.get("peak_fraction")}


def _goal(name: str, requirement: str, value: float | None, ok: bool | None, shown: str, detail: str,
          reason: str = "") -> dict[str, Any]:
    """``value``: the measured number (a ratio, seconds, a share) and ``shown`` it in the requirement's
    units; ``ok`` None: not evaluated (``reason`` says why)."""
    if value is None or ok is None:
        return {"goal": name, "requirement": requirement, "measured": None, "shown": "-",
                "decision": "NOT_EVALUATED", "detail": reason}
    return {"goal": name, "requirement": requirement, "measured": round(value, 4), "shown": shown,
            "decision": "PASS" if ok else "FAIL", "detail": detail}


def decide(rows: list[dict[str, Any]], machine: dict[str, Any], family: str,
           matches: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One entry per goal of the performance issues: PASS, FAIL, or NOT_EVALUATED with the reason (the
    tier goals read the head-to-head ``matches`` where the finalists played one)."""
    metric = get(family).bench_metric.replace("_", " ")
    goals = []
    for t in tiers(rows, family, matches):
        ratio = t["ratio"]
        goals.append(_goal(f"at {metric} >= {t['tier']:g}: fastest SDK / fastest peer", f">= {t['need']:g}x",
                           ratio, ratio is not None and ratio >= t["need"], f"{ratio:.2f}x" if ratio else "-",
                           f"{t['sdk'] and t['sdk']['name']} vs {t['peer'] and t['peer']['name']}"
                           + (f", head to head over {t['head_to_head']['rounds']} rounds, "
                              f"{t['head_to_head']['ratio_range'][0]:.2f}-{t['head_to_head']['ratio_range'][1]:.2f}x; "
                              f"rows {t['ratio_rows']:.2f}x" if t["head_to_head"] else ""),
                           "no SDK configuration reached this tier" if not t["sdk"] else
                           "no peer configuration reached this tier"))
    bf16 = fastest(rows, family, ("sdk",), None, "bf16")
    share = bf16 and bf16.get("peak_fraction")
    goals.append(_goal("bf16: fastest SDK row's share of the bf16 GEMM peak", f">= {BF16_PEAK_SHARE:.0%}",
                       share, share is not None and share >= BF16_PEAK_SHARE, f"{share:.0%}" if share else "-",
                       f"{bf16 and bf16['name']} (model FLOPs, padding excluded)",
                       "no bf16 row ran (this CPU has no native bf16)" if not bf16 else "no bf16 GEMM peak measured"))
    own = [r for r in rows if r["kind"] == "sdk" and r.get("overhead_fraction") is not None]
    worst = max(own, key=lambda r: r["overhead_fraction"], default=None)
    goals.append(_goal("SDK's own work (tokenize, plan, pad, scatter, decode), worst SDK row", f"<= {OWN_WORK:.0%}",
                       worst and worst["overhead_fraction"], worst is not None and worst["overhead_fraction"] <= OWN_WORK,
                       f"{worst['overhead_fraction']:.1%}" if worst else "-",
                       f"{worst and worst['name']}; {worst and round(worst['overhead_ms_per_batch'], 2)} ms per batch",
                       "no SDK row ran"))
    cold = machine.get("cold_start") or {}
    cached = (cold.get("cached") or {}).get("load_s")
    first = (cold.get("first") or {}).get("load_s")
    goals.append(_goal("cold start: a second process loading an OpenVINO target (cached compile)",
                       f"<= {COLD_START_S:g} s", cached, cached is not None and cached <= COLD_START_S,
                       f"{cached:.2f} s" if cached is not None else "-",
                       f"{cold.get('target')}: first load {first and round(first, 2)} s, cached "
                       f"{cached and round(cached, 2)} s, import {(cold.get('cached') or {}).get('import_s', 0):.2f} s "
                       f"before either", cold.get("error") or "not measured"))
    lat_sdk = min((r for r in rows if r["kind"] == "sdk" and r.get("p50_ms")
                   and (parity_of(r, family) or 0) >= get(family).bench_tiers[1]), key=lambda r: r["p50_ms"], default=None)
    st = [r for r in rows if r["name"] == "sentence-transformers backend=torch" and r.get("p50_ms")]
    lat_eager = st[0] if st else min((r for r in rows if r["kind"] == "eager" and r.get("p50_ms")),
                                     key=lambda r: r["p50_ms"], default=None)
    lat = lat_sdk and lat_eager and lat_sdk["p50_ms"] / lat_eager["p50_ms"]
    goals.append(_goal("batch-1 p50 latency: SDK / eager", "<= 0.7x", lat, lat is not None and lat <= 0.7,
                       f"{lat:.2f}x" if lat else "-",
                       f"{lat_sdk and lat_sdk['name']} {lat_sdk and round(lat_sdk['p50_ms'], 2)} ms vs "
                       f"{lat_eager and lat_eager['name']} {lat_eager and round(lat_eager['p50_ms'], 2)} ms",
                       "no latency rows"))
    imp = machine.get("sdk_import_s")
    goals.append(_goal("SDK import time", "<= 0.3 s", imp, imp is not None and imp <= 0.3,
                       f"{imp:.3f} s" if imp is not None else "-", "fresh interpreter, median of 3", "not measured"))
    rss_sdk, rss_eager = machine.get("sdk_peak_rss_mb"), machine.get("eager_peak_rss_mb")
    rss = rss_sdk and rss_eager and rss_eager / rss_sdk
    goals.append(_goal("peak RSS: eager process / SDK process", ">= 2x", rss, rss is not None and rss >= 2.0,
                       f"{rss:.2f}x" if rss else "-",
                       f"SDK {rss_sdk and round(rss_sdk)} MiB vs eager {rss_eager and round(rss_eager)} MiB",
                       "not measured"))
    return goals
