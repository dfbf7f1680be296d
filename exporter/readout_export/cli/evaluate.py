"""`readout-export evaluate` and `calibrate`: thin over `readout_eval` (no torch needed).

evaluate exits 0 when every gate passes (or, for a development / calibration run, when none is declared),
1 on any FAIL or NOT_EVALUATED gate or a test run with nothing gated, 2 on bad input (data, artifact,
gate, or a split-role conflict).
"""
from __future__ import annotations

import json

import click

from readout_sdk.atomic import write_report

from readout_export.cli.run import ARTIFACT_DIR, Directory, FilePath, SetupError, run_command


def _require_eval_extra(plots: bool = False) -> None:
    """The eval extra's modules (and matplotlib where plots are asked for), checked before any work: exit 2."""
    import importlib.util

    missing = [m for m in ("sklearn", "scipy", "pytrec_eval") + (("matplotlib",) if plots else ())
               if importlib.util.find_spec(m) is None]
    if missing:
        what = "evaluation with --plots" if missing == ["matplotlib"] else "evaluation"
        raise SetupError(f"{what} needs the eval extra (missing: {', '.join(missing)}); install it with: "
                         "pip install 'readout-export[eval]'")


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--data", required=True, type=FilePath(),
              help="JSONL rows: the family's input fields plus gold fields, optional 'id' and 'slice'.")
@click.option("--role", required=True, type=click.Choice(["development", "calibration", "test"]),
              help="The split role this data plays; the artifact's lineage keeps it, and one file keeps one role.")
@click.option("--parent", type=ARTIFACT_DIR,
              help="The release this one would replace: evaluated on the same rows for deltas and transitions.")
@click.option("--target", help="The target to evaluate (e.g. onnx-int8); default: what load() picks.")
@click.option("--gate", "gates", multiple=True,
              help="METRIC[SLICE]>=BOUND or <=BOUND, BOUND a number or parent[+-D]; repeatable; added to the "
                   "manifest's evaluation.gates.")
@click.option("--min-support", type=int, help="Cases a slice needs to be gated (default: the manifest's, else 30).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the full report (with per-case outputs) as JSON on stdout instead of the table.")
@click.option("--report", "json_path", type=FilePath(), help="Write the full report (with per-case outputs) to this file.")
@click.option("--junit", "junit_path", type=FilePath(), help="Write JUnit XML, one test case per gate.")
@click.option("--plots", "plots_dir", type=Directory(),
              help="Write PNGs here: reliability diagram, confusion matrix, recall@k.")
@click.option("--no-keep", is_flag=True, help="Do not record this run in the artifact (evaluation.json, lineage).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict line.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def evaluate(artifact: str, data: str, role: str, parent: str | None, target: str | None, gates: tuple[str, ...],
             min_support: int | None, as_json: bool, json_path: str | None, junit_path: str | None,
             plots_dir: str | None, no_keep: bool, quiet: bool, debug: bool) -> None:
    """Evaluate ARTIFACT's task quality on --data in a declared --role, with metrics matched to its output
    object, slices, gates and (with --parent) a paired comparison. A passing test evaluation moves the
    artifact to EVALUATED."""
    import sys

    if min_support is not None and min_support < 1:
        raise click.BadParameter(f"must be a positive integer, got {min_support}", param_hint="--min-support")

    def go():
        _require_eval_extra(plots=bool(plots_dir))
        from readout_eval.report import junit
        from readout_eval.run import evaluate as do_evaluate
        from readout_eval.run import public

        doc = do_evaluate(artifact, data, role, parent, target, gates, min_support, keep=not no_keep,
                          say=(lambda m: None) if quiet else (lambda m: click.echo(f"  {m}", err=True)))
        if json_path:
            write_report(json_path, json.dumps(public(doc), indent=2, allow_nan=False) + "\n")
        if junit_path:
            write_report(junit_path, junit(doc))
        if plots_dir:
            from readout_eval.plots import write

            for p in write(doc, plots_dir):
                click.echo(f"  wrote {p}", err=True)
        return doc

    doc = run_command(debug, as_json, go)
    from readout_eval.report import table
    from readout_eval.run import public

    if as_json:
        click.echo(json.dumps(public(doc), indent=2, allow_nan=False))
    else:
        text = table(doc)
        click.echo(text.splitlines()[-1] if quiet else text)
    sys.exit(doc["exit_code"])


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--data", required=True, type=FilePath(),
              help="JSONL calibration split (gold fields as for evaluate); refused if the lineage used it as test.")
@click.option("--output", required=True, type=Directory(), help="Where to write the new artifact.")
@click.option("--coverage", type=float, help="Fit an abstention threshold that answers at least this fraction.")
@click.option("--risk", type=float, help="Fit an abstention threshold whose error among answered cases is at most this.")
@click.option("--precision", type=float, help="Multilabel: per-label thresholds reaching this precision (default: max F1).")
@click.option("--target", help="The target whose outputs are fitted on (default: what load() picks).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def calibrate(artifact: str, data: str, output: str, coverage: float | None, risk: float | None,
              precision: float | None, target: str | None, as_json: bool, debug: bool) -> None:
    """Fit ARTIFACT's calibration on a calibration split (temperature for softmax heads, per-label
    thresholds for multilabel, the no-answer threshold for QA, abstention for a declared coverage or risk)
    and write a new artifact at --output whose graphs and tokenizer are ARTIFACT's, byte for byte."""
    def go():
        _require_eval_extra()
        from readout_eval.calibrate import calibrate as do_calibrate

        return do_calibrate(artifact, data, output, coverage, risk, precision, target,
                            say=(lambda m: None) if as_json else (lambda m: click.echo(f"  {m}", err=True)))

    summary = run_command(debug, as_json, go)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(f"calibrated {summary['artifact']}: release {summary['release_id'][:12]} over "
                   f"{str(summary['parent_release_id'])[:12]} (graphs and tokenizer unchanged); DRAFT until "
                   "`readout-export parity` passes on it")


COMMANDS = (evaluate, calibrate)
