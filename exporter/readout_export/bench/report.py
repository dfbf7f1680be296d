"""Bench reports: a terminal table, JSON, a PNG of throughput against parity, and the copy the artifact keeps."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from readout_sdk.agreement import metric_text
from readout_sdk.errors import SdkError
from readout_sdk.families import get

from readout_export.bench.goals import parity_of
from readout_export.bench.run import BenchReport, fp32_peak


def to_json(report: BenchReport) -> dict[str, Any]:
    return asdict(report)


def _parity_text(row: dict[str, Any]) -> str:
    """The bench corpus's parity, then the parity corpus's value of the same metric."""
    p, q = row.get("parity") or {}, row.get("parity_corpus") or {}
    if "min_cosine" in p:
        key, label = "min_cosine", "parity corpus min"
        text = f"cos min {metric_text(key, p[key])} mean {metric_text('mean_cosine', p['mean_cosine'])}"
    elif "decision_agreement" in p:
        key, label = "decision_agreement", "parity corpus"
        text = f"agree {metric_text(key, p[key])}"
    else:
        return "-"
    return text + (f"; {label} {metric_text(key, q[key])}" if key in q else "")


def _n(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def table(report: BenchReport) -> str:
    """The report as people read it: rows, the tier table, machine figures and the goals."""
    c, m = report.corpus, report.machine
    peaks = m["gemm_peak_gflops"]
    best_fp32 = fp32_peak(peaks)
    lines = [f"bench of {report.artifact} ({report.family}) on {m['id']}",
             f"corpus: {c['items']} items of {c['min_tokens']}..{c['max_tokens']} tokens (mean {c['mean_tokens']:.0f}), "
             f"seed {c['seed']}; throughput at batch {c['batch_size']} (SDK rows: at most {c['batch_size']} items and "
             f"max_batch_tokens padded tokens per batch), median of {c['repeats']} passes; latency at batch 1 "
             f"over {c['latency_items']} items (fastest of 3 calls each); parity against eager PyTorch fp32 on the "
             f"same items, and on the parity harness's corpus ({c.get('parity_corpus_items', '-')} items: one-word, "
             "accented, emoji, past max_length)", "",
             "x eager is a row's items/s over the fastest eager row's (1.00x: as fast as eager PyTorch); "
             "GFLOP/s counts the model's own FLOPs (padding excluded); %peak divides it by the measured GEMM peak of "
             "the arithmetic the row runs its MatMuls in (the peak column); own work is the SDK's share of the run "
             "(tokenize, plan, pad, scatter, decode: the run replayed without the graph)", ""]
    head = (f"{'configuration':<60} {'prec':<5} {'items/s':>8} {'x eager':>7} {'p50 ms':>7} {'p95 ms':>7} "
            f"{'GFLOP/s':>8} {'peak':>5} {'%peak':>6} {'own work':>9}  parity")
    lines += [head, "-" * len(head)]
    for r in report.rows:
        if r.get("decision") == "NOT_EVALUATED":
            lines.append(f"{r['name']:<60} {r['precision']:<5} NOT_EVALUATED ({r['reason']})")
            continue
        peak = f"{r['peak_fraction']:.0%}" if r.get("peak_fraction") else "-"
        own = f"{r['overhead_fraction']:.1%}" if r.get("overhead_fraction") is not None else "-"
        lines.append(f"{r['name']:<60} {r['precision']:<5} {r['items_per_s']:>8.1f} {r.get('vs_eager', 0):>6.2f}x "
                     f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['gflops']:>8.1f} {r.get('peak', '-'):>5} {peak:>6} "
                     f"{own:>9}  {_parity_text(r)}")
    metric = get(report.family).bench_metric.replace("_", " ")
    lines += ["", f"tiers: the fastest configuration reaching each {metric} on both corpora (SDK vs peers, "
              "eager included), chosen by the rows above; where the two were then timed head to head (rounds of "
              "one pass each, alternated), items/s and ratio are that match's (median; the range is the rounds' "
              "ratios) and 'rows' the rows' own ratio",
              f"{'tier':<10} {'fastest SDK':<52} {'items/s':>8} {'%peak':>6}   {'fastest peer':<60} {'items/s':>8} "
              f"{'%peak':>6} {'ratio':>6}  need"]
    for t in report.tiers:
        sdk, peer = t["sdk"] or {}, t["peer"] or {}

        def share(x: dict[str, Any]) -> str:
            return f"{x['peak_fraction']:.0%}" if x.get("peak_fraction") else "-"
        ratio = f"{t['ratio']:.2f}x" if t["ratio"] else "-"
        match = t.get("head_to_head")
        mine, theirs = (match["sdk_items_per_s"], match["peer_items_per_s"]) if match else \
            (sdk.get("items_per_s"), peer.get("items_per_s"))
        played = (f" [{match['ratio_range'][0]:.2f}-{match['ratio_range'][1]:.2f}], rows {t['ratio_rows']:.2f}x"
                  if match else "")
        lines.append(f">= {t['tier']:<7g} {sdk.get('name', 'none reached it'):<52} {_n(mine):>8} "
                     f"{share(sdk):>6}   {peer.get('name', 'none reached it'):<60} {_n(theirs):>8} "
                     f"{share(peer):>6} {ratio:>6}  >= {t['need']:g}x{played}")
    lines += ["", f"GEMM peaks, GFLOP/s ({1536}^3, best of 5): fp32 {_n(best_fp32, 0)} (numpy {_n(peaks.get('fp32'), 0)}, "
                  f"OpenVINO {_n(peaks.get('openvino_f32'), 0)}), bf16 {_n(peaks.get('openvino_bf16'), 0)} (OpenVINO; "
                  f"'-': no native bf16), int8 {_n(peaks.get('openvino_int8'), 0)} (OpenVINO u8 x s8 GEMM); model "
                  f"{m['model_flops_per_item'] / 1e9:.2f} GFLOP per corpus item (padding excluded)"]
    if "sdk_import_s" in m:
        base = m.get("base_install", {})
        lines.append(f"SDK import {m['sdk_import_s']:.3f} s; peak RSS: SDK process {_n(m.get('sdk_peak_rss_mb'), 0)} "
                     f"MiB, eager process {_n(m.get('eager_peak_rss_mb'), 0)} MiB; SDK install with its CPU runtime ([cpu]) "
                     f"{base.get('total_mb', 0):.0f} MiB ({', '.join(f'{k} {v:.1f}' for k, v in base.get('distributions', {}).items())} MiB)")
        for who, err in (m.get("rss_errors") or {}).items():
            lines.append(f"  peak RSS of the {who} process not measured: {err}")
    cold = m.get("cold_start")
    if cold:
        f, k = cold.get("first") or {}, cold.get("cached") or {}
        lines.append(f"cold start of {cold['target']} on {cold['backend']} in fresh processes: first load "
                     f"{_n(f.get('load_s'), 2)} s ({f.get('cache') or f.get('error')}), second load {_n(k.get('load_s'), 2)} s "
                     f"({k.get('cache') or k.get('error')}); import {_n(k.get('import_s'), 2)} s before each")
    lines += ["", f"{'goal':<72} {'requirement':<12} {'measured':>9}  decision"]
    for g in report.goals:
        lines.append(f"{g['goal']:<72} {g['requirement']:<12} {g['shown']:>9}  {g['decision']}  ({g['detail']})")
    lines.append(f"\nin {report.seconds:.0f} s")
    return "\n".join(lines)


class PlotUnavailable(SdkError, RuntimeError):
    """The bench plot needs matplotlib (the ``bench`` extra)."""


def plot(report: BenchReport, path: Path) -> None:
    """Throughput against parity (1 - min cosine, or 1 - agreement: the lower of the two corpora's, what the
    tiers read; on a log axis); needs matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("the plot needs matplotlib: pip install 'readout-export[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colors = {"eager": "tab:gray", "peer": "tab:blue", "sdk": "tab:red"}
    for r in report.rows:
        if not r.get("items_per_s"):
            continue
        value = parity_of(r, report.family)
        gap = max(1.0 - (1.0 if value is None else value), 1e-8)
        ax.scatter(gap, r["items_per_s"], color=colors[r["kind"]], s=40)
        ax.annotate(r["name"].replace("readout-sdk ", "sdk "), (gap, r["items_per_s"]), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")
    ax.set_xscale("log")
    metric = get(report.family).bench_metric.replace("_", " ")
    ax.set_xlabel(f"1 - {metric} vs eager PyTorch fp32 (log; left is closer)")
    ax.set_ylabel(f"items/s at batch {report.corpus['batch_size']}")
    ax.set_title(f"{Path(report.artifact).name}: throughput vs parity (gray eager, blue peers, red this SDK)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def keep_in_artifact(report: BenchReport) -> None:
    """The artifact keeps bench.json (with the machine it was measured on); a default load() uses its speeds
    only where the manifest declared serving.min_parity (`readout_sdk.backend.choose`)."""
    from readout_sdk.release.lifecycle import keep

    keep(Path(report.artifact), "bench", {"machine": report.machine["id"], "rows": report.rows, "goals": report.goals})
