"""Bench reports: a terminal table, JSON, a PNG of throughput against parity, and the copy the artifact keeps."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from readout_sdk.families import get

from readout_export.bench.run import BenchReport


def to_json(report: BenchReport) -> dict[str, Any]:
    return asdict(report)


def _parity_text(row: dict[str, Any]) -> str:
    p = row.get("parity") or {}
    if "min_cosine" in p:
        return f"cos min {p['min_cosine']:.5f} mean {p['mean_cosine']:.5f}"
    if "decision_agreement" in p:
        return f"agree {p['decision_agreement']:.4f}"
    return "-"


def table(report: BenchReport) -> str:
    c, m = report.corpus, report.machine
    peaks = m["gemm_peak_gflops"]
    lines = [f"bench of {report.artifact} ({report.family}) on {m['id']}",
             f"corpus: {c['items']} items, {c['min_tokens']}..{c['max_tokens']} tokens (mean {c['mean_tokens']:.0f}), "
             f"seed {c['seed']}; throughput at batch {c['batch_size']} (SDK rows: at most {c['batch_size']} items and "
             f"max_batch_tokens padded tokens per batch), median of {c['repeats']}; latency at batch 1 "
             f"over {c['latency_items']} items (fastest of 3 calls each); parity against eager PyTorch fp32 on the same items", ""]
    head = (f"{'configuration':<52} {'prec':<5} {'items/s':>8} {'x eager':>7} {'p50 ms':>7} {'p95 ms':>7} "
            f"{'GFLOP/s':>8} {'%peak':>6} {'SDK ms/batch':>12}  parity")
    lines += [head, "-" * len(head)]
    for r in report.rows:
        if r.get("decision") == "NOT_EVALUATED":
            lines.append(f"{r['name']:<52} {r['precision']:<5} NOT_EVALUATED ({r['reason']})")
            continue
        peak = f"{r['peak_fraction']:.0%}" if r.get("peak_fraction") else "-"
        ovh = f"{r['overhead_ms_per_batch']:.2f}" if r.get("overhead_ms_per_batch") is not None else "-"
        if r.get("overhead_fraction") is not None:
            ovh += f" ({r['overhead_fraction']:.0%})"
        lines.append(f"{r['name']:<52} {r['precision']:<5} {r['items_per_s']:>8.1f} {r.get('vs_eager', 0):>6.2f}x "
                     f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['gflops']:>8.1f} {peak:>6} {ovh:>12}  "
                     f"{_parity_text(r)}")
    fmt = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
    lines += ["", f"GEMM peak GFLOP/s ({1536}^3): numpy fp32 {fmt(peaks.get('fp32'))}, OpenVINO f32 "
                  f"{fmt(peaks.get('openvino_f32'))}, OpenVINO bf16 {fmt(peaks.get('openvino_bf16'))}; model "
                  f"{m['model_flops_per_item'] / 1e9:.2f} GFLOP per corpus item (padding excluded)"]
    if "sdk_import_s" in m:
        base = m.get("base_install", {})
        lines.append(f"SDK import {m['sdk_import_s']:.3f} s; peak RSS: SDK process {m.get('sdk_peak_rss_mb') or '-'} "
                     f"MiB, eager process {m.get('eager_peak_rss_mb') or '-'} MiB; base SDK install "
                     f"{base.get('total_mb', 0):.0f} MiB ({', '.join(f'{k} {v}' for k, v in base.get('distributions', {}).items())})")
        for who, err in (m.get("rss_errors") or {}).items():
            lines.append(f"  peak RSS of the {who} process not measured: {err}")
    lines += ["", f"{'goal':<62} {'requirement':<28} {'measured':>9}  decision"]
    for g in report.goals:
        measured = "-" if g["measured"] is None else f"{g['measured']:.2f}"
        lines.append(f"{g['goal']:<62} {g['requirement']:<28} {measured:>9}  {g['decision']}  ({g['detail']})")
    lines.append(f"\nin {report.seconds:.0f}s")
    return "\n".join(lines)


def plot(report: BenchReport, path: Path) -> None:
    """Throughput against parity (1 - min cosine, or 1 - agreement, on a log axis); needs matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("the plot needs matplotlib: pip install 'readout-export[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colors = {"eager": "tab:gray", "peer": "tab:blue", "sdk": "tab:red"}
    for r in report.rows:
        if not r.get("items_per_s"):
            continue
        p = r.get("parity") or {}
        value = p.get("min_cosine", p.get("decision_agreement", 1.0))
        gap = max(1.0 - value, 1e-8)
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
    from readout_sdk.lifecycle import keep

    keep(Path(report.artifact), "bench", {"machine": report.machine["id"], "rows": report.rows, "goals": report.goals})
