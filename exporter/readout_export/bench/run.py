"""`readout-export bench`: every configuration on one fixed corpus, in one run, with its parity."""
from __future__ import annotations

import gc
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from readout_sdk.artifact import open_artifact
from readout_sdk.backend import machine_id
from readout_sdk.targets import BACKENDS, KINDS

from readout_export.bench import configs as C
from readout_export.bench import machine as M
from readout_export.bench.goals import decide, finalists, tiers
from readout_export.bench.measure import agreement, head_to_head, latency, throughput
from readout_export.errors import ManifestError

BENCH_SEED = 512


@dataclass
class BenchReport:
    """Rows (one per configuration), machine measurements and goal decisions of one bench run."""

    artifact: str
    family: str
    corpus: dict[str, Any]
    machine: dict[str, Any]
    rows: list[dict[str, Any]]
    goals: list[dict[str, Any]]
    seconds: float = 0.0
    tiers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    head_to_head: list[dict[str, Any]] = field(default_factory=list)  # tier finalists, alternated passes


def run_bench(path: str | Path, items: int = 512, repeats: int = 5, latency_items: int = 64,
              processes: bool = True, say: Callable[[str], None] = lambda _m: None) -> BenchReport:
    """Measure every configuration on ``items`` texts (5..110 words, about 8..148 WordPiece tokens; fixed
    seed), its parity there and on the parity harness's corpus (tiers read the lower). ``processes``: also
    measure import time, peak RSS and installed size in fresh interpreters."""
    from readout_export.reference import reference_graph
    from readout_parity.corpus import default_corpus, mixed_corpus
    from readout_sdk.encoder import TextEncoder
    from readout_sdk.families import REGISTRY, get

    start = time.monotonic()
    # GEMM peaks first, before any runtime of a configuration holds threads or reserved cores
    say("machine: GEMM peaks")
    mach: dict[str, Any] = {"id": machine_id(), "gemm_peak_gflops": _peaks()}
    art = open_artifact(path)
    family = art.family
    spec = get(family)
    if spec.bench_peer is None:  # a family is benched where an eager peer exists to compare with
        covered = ", ".join(f.name for f in REGISTRY.values() if f.bench_peer)
        raise ManifestError("$.family", f"bench covers {covered}; this artifact is {family}")
    corpus = mixed_corpus(spec, items, BENCH_SEED)
    tokenizer = TextEncoder(art.record, art.path / art.tokenizer_file).tokenizer
    lengths = [len(e.ids) for e in tokenizer.encode_batch(corpus)]
    say("building the eager reference from the source model")
    graph = reference_graph(art)
    a, b = M.flop_model(graph, art.record, tokenizer.get_vocab_size() // 2)
    useful = sum(a * n + b * n * n for n in lengths)  # FLOPs of the items themselves, padding excluded
    work = C.workdir()
    say("preparing peers")
    eager = C.eager_config(art, graph, tokenizer)
    configs = [eager] + C.sentence_transformers_configs(art) + [C.optimum_config(art)]
    configs += C.plain_graph_configs(art, graph, tokenizer, work) + C.sdk_configs(art)
    reference = eager.raw(corpus)  # type: ignore[misc]
    # every row's parity is also taken on the parity harness's own corpus (one-word texts, accents, emoji, a
    # text past max_length): a tier is claimed on both, as a budgeted target's proof is
    edge = default_corpus(spec)
    edge_reference = eager.raw(edge)  # type: ignore[misc]
    rows = _measure_rows(configs, corpus, reference, edge, edge_reference, family, useful, repeats, latency_items,
                         say)
    matches = _head_to_head_then_release(configs, rows, family, corpus, repeats, say)
    eager_speed = max((r["items_per_s"] for r in rows if r["kind"] == "eager" and r.get("items_per_s")), default=None)
    for r in rows:
        if eager_speed and r.get("items_per_s"):
            r["vs_eager"] = r["items_per_s"] / eager_speed
    _peak_fractions(art, rows, mach, useful / len(corpus), say)
    if processes:
        mach.update(_process_measures(art, spec, corpus, rows, say))
    goals = decide(rows, mach, family, matches)
    tier_table = tiers(rows, family, matches)
    return BenchReport(str(art.path), family,
                       {"items": len(corpus), "seed": BENCH_SEED, "min_tokens": min(lengths),
                        "max_tokens": max(lengths), "mean_tokens": sum(lengths) / len(lengths),
                        "batch_size": C.BATCH, "repeats": repeats, "latency_items": latency_items,
                        "parity_corpus_items": len(edge)},
                       mach, rows, goals, time.monotonic() - start, tier_table, head_to_head=matches)


def _measure_rows(configs: list[Any], corpus: list[Any], reference: Any, edge: list[Any], edge_reference: Any,
                  family: str, useful: float, repeats: int, latency_items: int,
                  say: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per configuration: throughput, latency, parity on the bench corpus and on the parity harness's
    (a skipped configuration is NOT_EVALUATED, with its reason)."""
    rows = []
    for cfg in configs:
        row: dict[str, Any] = {"name": cfg.name, "kind": cfg.kind, "precision": cfg.precision, "target": cfg.target,
                               "backend": cfg.backend}
        if cfg.skip:
            row.update(decision="NOT_EVALUATED", reason=cfg.skip)
            rows.append(row)
            continue
        say(f"{cfg.name}: throughput")
        row.update(throughput(cfg, corpus, repeats))
        say(f"{cfg.name}: latency")
        row.update(latency(cfg, corpus, latency_items))
        row["parity"] = agreement(family, cfg.raw(corpus), reference)  # type: ignore[misc]
        row["parity_corpus"] = agreement(family, cfg.raw(edge), edge_reference)  # type: ignore[misc]
        row["gflops"] = useful / 1e9 * row["items_per_s"] / len(corpus)
        row.update(cfg.extra)
        rows.append(row)
    return rows


def _head_to_head_then_release(configs: list[Any], rows: list[dict[str, Any]], family: str, corpus: list[Any],
                               repeats: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The tiers' finalists again, head to head (alternated passes): the rows were measured minutes apart, and
    the tier goals are ratios. Every configuration is still loaded (they all were from the start); each is
    released once the matches are played."""
    matches = []
    by_name = {cfg.name: cfg for cfg in configs if cfg.call is not None}
    for sdk_name, peer_name in finalists(rows, family):
        say(f"head to head: {sdk_name} vs {peer_name}")
        matches.append(head_to_head(by_name[sdk_name], by_name[peer_name], corpus, repeats))
    for cfg in configs:
        if cfg.engine is not None:
            cfg.engine.close()
        cfg.call = cfg.raw = cfg.engine = None
    gc.collect()
    return matches


def _peak_fractions(art: Any, rows: list[dict[str, Any]], mach: dict[str, Any], flops_per_item: float,
                    say: Callable[[str], None]) -> None:
    """Each row's share of the machine's GEMM peak for its kind of arithmetic."""
    # measured again after the rows and the better kept: a peak taken while something else held the
    # CPU would otherwise make every share look higher than it is
    say("machine: GEMM peaks again")
    again = _peaks()
    mach["gemm_peak_gflops"] = {k: max((v for v in (mach["gemm_peak_gflops"].get(k), again.get(k)) if v is not None),
                                       default=None) for k in again}
    mach["model_flops_per_item"] = flops_per_item
    recipes = {t.name: t.recipe for t in art.targets if t.recipe}
    for r in rows:
        r["peak"] = _peak_kind(r, recipes.get(r.get("target") or ""))
        peak = PEAKS[r["peak"]](mach["gemm_peak_gflops"])
        if peak and r.get("gflops"):
            r["peak_fraction"] = r["gflops"] / peak


def _process_measures(art: Any, spec: Any, corpus: list[Any], rows: list[dict[str, Any]],
                      say: Callable[[str], None]) -> dict[str, Any]:
    """What fresh interpreters measure: import time, peak RSS of the SDK and of the eager peer, the base
    install's size, and a cold start with the compiled-model cache."""
    say("machine: import time, peak RSS, installed size")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(corpus, f)
    items_file = Path(f.name)
    mach: dict[str, Any] = {"sdk_import_s": M.import_seconds()}
    sdk_rss = M.peak_rss_sdk(art.path, items_file, spec.call)
    eager_rss = M.peak_rss_eager(Path(art.source.get("model", "")), items_file, spec.bench_peer)
    mach["sdk_peak_rss_mb"] = sdk_rss.get("peak_rss_mb")
    mach["eager_peak_rss_mb"] = eager_rss.get("peak_rss_mb")
    mach["rss_errors"] = {k: v["error"] for k, v in (("sdk", sdk_rss), ("eager", eager_rss)) if "error" in v}
    mach["base_install"] = M.base_install_mb()
    items_file.unlink()
    ov = [r for r in rows if r["kind"] == "sdk" and r.get("items_per_s")
          and getattr(BACKENDS.get(r.get("backend") or ""), "compiled_cache", False)]
    if ov:
        say("machine: cold start with the compiled-model cache")
        mach["cold_start"] = M.cold_start(art.path, max(ov, key=lambda r: r["items_per_s"])["target"])
    return mach


def _peaks() -> dict[str, float | None]:
    return {"fp32": M.gemm_peak_fp32(), "openvino_f32": M.gemm_peak_openvino("f32"),
            "openvino_bf16": M.gemm_peak_openvino("bf16"), "openvino_int8": M.gemm_peak_openvino_int8()}


FP32_GEMMS = ("fp32", "openvino_f32")  # the fp32 GEMMs measured (numpy's BLAS, OpenVINO at f32)


def fp32_peak(peaks: dict[str, Any]) -> float | None:
    """The best fp32 GEMM measured (None: none was)."""
    return max((peaks[k] for k in FP32_GEMMS if peaks.get(k) is not None), default=None)


# one definition of "peak" per row: the best measured GEMM of the arithmetic the row runs its MatMuls in
PEAKS = {"fp32": fp32_peak, "bf16": lambda p: p.get("openvino_bf16"), "int8": lambda p: p.get("openvino_int8")}


def _peak_kind(row: dict[str, Any], recipe: dict[str, Any] | None) -> str:
    """Which GEMM peak a row competes with: the arithmetic its target kind runs its MatMuls in (a budgeted
    row's recipe says: int8 when it chose an int8 graph, the upper bound of a mixed graph); a peer's precision's."""
    kind = KINDS.get(row.get("target") or "")
    arithmetic = kind.arithmetic_of(recipe) if kind is not None else row["precision"]
    return arithmetic if arithmetic in PEAKS else "fp32"
