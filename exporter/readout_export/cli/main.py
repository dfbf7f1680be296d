"""The `readout-export` command: build, validate, inspect.

Exit codes: 0 success, 2 bad manifest or usage, 1 build failure. No traceback unless --debug.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from readout_sdk.atomic import write_report

from readout_export.cli.run import ARTIFACT_DIR, FilePath, OneLineGroup, require_export_extra, run_command


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="readout-export")
def main() -> None:
    """Export transformer encoders with their readout inside the graph (readout-abi/1)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():  # SIGTERM unwinds like Ctrl-C: staging is removed
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@main.command()
@click.argument("manifest", type=FilePath())
@click.option("--force", is_flag=True, help="Replace an existing artifact at output_dir.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the result.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def build(manifest: str, force: bool, quiet: bool, as_json: bool, debug: bool) -> None:
    """Build the artifact MANIFEST describes (one ONNX graph per target, readout inside)."""
    from readout_export.build import build as do_build
    from readout_export.cli.progress import Steps

    def go():
        require_export_extra()
        with Steps(enabled=not quiet) as progress:  # on stderr: --json keeps stdout for the result
            return do_build(manifest, force=force, progress=progress)

    result = run_command(debug, as_json, go)
    if as_json:
        click.echo(json.dumps({"ok": True, "output_dir": str(result.output_dir), "targets": result.targets,
                               "family": result.record["family"], "max_abs_error": result.max_abs_error,
                               "release_id": result.record["identity"]["release_id"],
                               "seconds": round(result.seconds, 2), "notes": result.notes}))
    elif not quiet:
        click.echo(f"built {result.output_dir} ({result.record['family']}, "
                   f"{', '.join(dict.fromkeys(t['file'] for t in result.targets))}) in {result.seconds:.1f}s; "
                   f"release {result.record['identity']['release_id'][:12]}, DRAFT until `readout-export parity` passes")


@main.command()
@click.argument("manifest", type=FilePath())
@click.option("--json", "as_json", is_flag=True, help="Print the resolved plan as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def validate(manifest: str, as_json: bool, debug: bool) -> None:
    """Check MANIFEST against its model directory without building anything; every problem found is
    reported, one line each (build stops at the first)."""
    from readout_export.build import validate as do_validate

    plan = run_command(debug, as_json, lambda: do_validate(manifest, every=True))
    summary = {"ok": True, "family": plan.family, "model": str(plan.source.root), "max_length": plan.max_length,
               "pooling": plan.pooling, "rows": plan.rows, "normalize": plan.normalize,
               "projection": [asdict(d) | {"path": str(d.path)} for d in plan.dense], "labels": plan.labels,
               "thresholds": plan.thresholds, "score_type": plan.score_type,
               "targets": [t.manifest_entry() for t in plan.targets],
               "min_parity": plan.min_parity,
               "output_dir": str(plan.output_dir), "notes": plan.notes}
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(f"ok: {manifest} is a valid {plan.family} manifest")
        for key in ("model", "max_length", "pooling", "rows", "normalize", "labels", "score_type", "output_dir"):
            if summary[key] not in (None, [], "none") or key == "normalize":
                click.echo(f"  {key}: {summary[key]}")
        for note in plan.notes:
            click.echo(f"  note: {note}")


def _listed(target: object) -> dict:
    """A target as `inspect --json` shows it: every readout.json field (None where unset); the manifest's
    budget is not one of them (a budgeted target's recipe carries it)."""
    out = asdict(target)  # type: ignore[call-overload]
    out.pop("budget", None)
    return out


@main.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--json", "as_json", is_flag=True, help="Print readout.json's verified content as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def inspect(artifact: str, as_json: bool, debug: bool) -> None:
    """Verify ARTIFACT (hashes, embedded records) and summarize what its outputs mean."""
    from readout_export.summary import signature_line, summarize
    from readout_sdk.artifact import open_artifact, unlisted

    art = run_command(debug, as_json, lambda: open_artifact(artifact))
    if as_json:
        from readout_sdk.release.lifecycle import derive

        click.echo(json.dumps({"ok": True, "path": str(art.path), "abi": art.record,
                               "targets": [_listed(t) for t in art.targets], "tokenizer": art.tokenizer_file,
                               "source": art.source, "lifecycle": derive(art).to_json(),
                               "lifecycle_kept": (art.extra.get("lifecycle") or {}).get("state"),
                               "serving": art.extra.get("serving"), "signatures": signature_line(art),
                               "ignored": unlisted(art)}, indent=2))
    else:
        click.echo(summarize(art))


@main.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--corpus", type=FilePath(dir_okay=False, exists=True),
              help="JSONL of your own inputs ({'text': ...}, pairs, or {'question', 'choices'}); default: built-in.")
@click.option("--widths", default="1,2,7,32", show_default=True, help="Batch widths, comma-separated.")
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON on stdout instead of the table.")
@click.option("--report", "json_path", type=FilePath(), help="Write the full report as JSON to this file.")
@click.option("--junit", "junit_path", type=FilePath(), help="Write JUnit XML (one case per check).")
@click.option("--strict", is_flag=True, help="Exit 1 on any NOT_EVALUATED check too.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary line.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def parity(artifact: str, corpus: str | None, widths: str, as_json: bool, json_path: str | None,
           junit_path: str | None, strict: bool, quiet: bool, debug: bool) -> None:
    """Reconcile ARTIFACT's semantic record with its source model, then prove its compiled targets equal
    eager PyTorch (per family, padding side, batch width).

    Exit 0 when every evaluated check passes, 1 on any FAIL (and with --strict on any NOT_EVALUATED),
    2 on a bad artifact or usage. The artifact keeps the report as parity.json.
    """
    try:
        sizes = tuple(int(w) for w in widths.split(","))
    except ValueError:
        sizes = ()  # not integers: refused below with the other bad lists
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"expected positive integers separated by commas, got {widths!r}",
                                 param_hint="--widths")

    def go():
        require_export_extra()
        from readout_export.reference import check_parity
        from readout_parity.report import junit, keep_in_artifact, to_json

        try:
            report = check_parity(artifact, corpus, sizes,
                                  say=(lambda m: None) if quiet else (lambda m: click.echo(f"  {m}", err=True)))
        except ValueError as e:  # a corpus or width the harness cannot use: bad input, exit 2
            from readout_sdk.errors import InputRefused

            raise InputRefused(str(e)) from None
        keep_in_artifact(report)
        if json_path:
            write_report(json_path, json.dumps(to_json(report), indent=2) + "\n")
        if junit_path:
            write_report(junit_path, junit(report))
        return report

    report = run_command(debug, as_json, go)
    from readout_parity.report import table, to_json

    if as_json:
        click.echo(json.dumps(to_json(report), indent=2))
    else:
        text = table(report)
        click.echo(text.splitlines()[-1] if quiet else text)
    sys.exit(report.exit_code(strict))


@main.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--items", type=int, default=None, help="Corpus size (fixed seed; 5..110 words, about 8..148 WordPiece "
                                                      "tokens). Default: 512 on the CPU, 4096 on CUDA.")
@click.option("--repeats", default=5, show_default=True, help="Full passes per configuration (the median counts), and rounds of each tier's head-to-head match "
                   "(its two finalists alternated, one pass each per round).")
@click.option("--latency-items", default=64, show_default=True, help="Single-item calls timed for p50/p95.")
@click.option("--no-processes", is_flag=True, help="Skip import time, peak RSS and installed size (subprocesses).")
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON on stdout instead of the table.")
@click.option("--report", "json_path", type=FilePath(), help="Write the full report as JSON to this file.")
@click.option("--plot", "plot_path", type=FilePath(), help="Write a PNG of throughput vs parity.")
@click.option("--keep/--no-keep", default=True, show_default=True,
              help="Keep bench.json in the artifact (a default load() uses its speeds only where the manifest "
                   "declared serving.min_parity, among targets whose kept parity meets that floor).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cuda: the SDK on the GPU end to end against plain ONNX Runtime on the same graphs and "
                   "sentence-transformers on CUDA (fp32, fp16, bf16), parity per row against eager fp32 with TF32 "
                   "off (--items defaults to 4096 there; --latency-items, --plot and --keep do not apply).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def bench(artifact: str, items: int | None, repeats: int, latency_items: int, no_processes: bool, as_json: bool,
          json_path: str | None, plot_path: str | None, keep: bool, device: str, debug: bool) -> None:
    """Measure ARTIFACT against its peers in one run: throughput (batch 32), latency (batch 1), parity
    against eager PyTorch, GEMM peak and achieved GFLOP/s, import time, peak RSS, install size, and the
    performance goals; each parity tier's fastest SDK and peer configurations are then timed head to head
    (alternated passes), and the tier's ratio is that match's. A benchmark, not a test: it exits 0 whatever
    the goals decide."""
    from pathlib import Path

    for name, value in (("--items", items), ("--repeats", repeats), ("--latency-items", latency_items)):
        if value is not None and value < 1:
            raise click.BadParameter(f"must be at least 1, got {value}", param_hint=name)
    if device == "cuda":
        _bench_gpu(artifact, items or 4096, repeats, json_path, as_json, debug)
        return
    items = items or 512

    def go():
        require_export_extra()
        from readout_export.bench.report import keep_in_artifact, plot, to_json
        from readout_export.bench.run import run_bench

        report = run_bench(artifact, items, repeats, latency_items, not no_processes,
                           say=lambda m: click.echo(f"  {m}", err=True))
        if keep:
            keep_in_artifact(report)
        if json_path:
            write_report(json_path, json.dumps(to_json(report), indent=2, default=str) + "\n")
        if plot_path:
            plot(report, Path(plot_path))
        return report

    report = run_command(debug, as_json, go)
    from readout_export.bench.report import table, to_json

    click.echo(json.dumps(to_json(report), indent=2, default=str) if as_json else table(report))


def _bench_gpu(artifact: str, items: int, repeats: int, json_path: str | None, as_json: bool, debug: bool) -> None:
    """`bench --device cuda` (`readout_export.bench.gpu`)."""
    def go():
        require_export_extra()
        from readout_export.bench.gpu import run_gpu_bench

        report = run_gpu_bench(artifact, items, repeats, say=lambda m: click.echo(f"  {m}", err=True))
        if json_path:
            write_report(json_path, json.dumps(asdict(report), indent=2, default=str) + "\n")
        return report

    report = run_command(debug, as_json, go)
    from readout_export.bench.gpu import text_table

    click.echo(json.dumps(asdict(report), indent=2, default=str) if as_json else text_table(report))


@main.command(name="compile")
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--target", required=True, help="tensorrt-fp32, tensorrt-fp16, tensorrt-int8 or tensorrt-bf16.")
@click.option("--no-parity", is_flag=True, help="Skip the parity checks after compiling.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def compile_(artifact: str, target: str, no_parity: bool, debug: bool) -> None:
    """Add a TensorRT engine to ARTIFACT, built on this machine (the one that will run it).

    Needs the base install plus the tensorrt extra, never torch. Writes model.TARGET.engine (ABI inside)
    and the raw .plan beside it, lists the engine in readout.json atomically, then runs parity: against
    eager PyTorch where it is installed, else against the artifact's fp32 ONNX graph on the built-in
    corpus. Exit 0 on success, 1 if a parity check fails, 2 if this machine or artifact cannot compile.
    """
    import importlib.util

    from readout_export.targets.compile import compile_engine

    say = lambda m: click.echo(f"  {m}", err=True)  # noqa: E731
    entry = run_command(debug, False, lambda: compile_engine(artifact, target, say))
    click.echo(f"compiled {entry['file']} (TensorRT {entry['tensorrt']}, {entry['gpu']}, sm {entry['compute_capability']})")
    if no_parity:
        return
    from readout_parity import run_parity
    from readout_parity.report import keep_in_artifact, table

    if importlib.util.find_spec("torch"):  # eager PyTorch where it is installed; else the onnx-fp32 graph
        from readout_export.reference import check_parity

        report = run_command(debug, False, lambda: check_parity(artifact, say=say, only=[target]))
    else:
        report = run_command(debug, False, lambda: run_parity(artifact, say=say, only=[target]))
    keep_in_artifact(report, only=[target])
    click.echo(table(report))
    sys.exit(report.exit_code())
