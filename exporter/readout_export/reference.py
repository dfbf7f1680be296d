"""The eager PyTorch reference: the artifact's own readout, rebuilt from the source model it records,
as a runner the parity harness compares candidates with (`readout_parity.Reference`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from readout_sdk.artifact import Artifact, open_artifact, sha256_file
from readout_sdk.runners import Lifecycle

from readout_parity import ParityError, Reference, Report, run_parity
from readout_parity.report import DEFAULT_POSITIONS

REFERENCE = "eager PyTorch fp32, each example alone, unpadded"


def verify_source(art: Artifact) -> Path:
    """The source model directory, after checking every weight file against the artifact's hashes."""
    from readout_export.graph.record import weights_digest

    root = Path(art.source.get("model", ""))
    if not root.is_dir():
        raise ParityError(f"source model {root} (recorded in readout.json) is not on this machine; "
                          "the eager reference needs it")
    files = _verify_files(root, art.source.get("weights", []), "source weights")
    if weights_digest(files) != art.record["provenance"]["weights_sha256"]:
        raise ParityError("source weights do not add up to the artifact's weights_sha256")
    _verify_adapter(art)
    _verify_files(root, art.source.get("code") or [], "source code")
    return root


def _verify_files(root: Path, listed: list[dict[str, Any]], what: str) -> list[tuple[str, str]]:
    """Each listed file under ``root`` still has its recorded sha256 (else the reference would run other code
    or other weights than the artifact was built from)."""
    out = []
    if not isinstance(listed, list) or not all(isinstance(f, dict) and isinstance(f.get("file"), str)
                                               and isinstance(f.get("sha256"), str) for f in listed):
        raise ParityError(f"readout.json lists the {what} as {str(listed)[:80]}, not as files with their sha256")
    for f in listed:
        path = root / f["file"]
        if not path.is_file():
            raise ParityError(f"{what}: {path} is missing")
        actual = sha256_file(path)
        if actual != f["sha256"]:
            raise ParityError(f"{what} changed since the build: {path} has sha256 {actual}, the artifact was built "
                              f"from {f['sha256']}; refusing to compare against it")
        out.append((f["file"], actual))
    return out


def _verify_adapter(art: Artifact) -> None:
    """The adapter directory readout.json's source records, file by file (an artifact without one: nothing)."""
    from readout_export.graph.record import weights_digest

    adapter = art.source.get("adapter")
    if not adapter:
        return
    if not isinstance(adapter, dict) or not isinstance(adapter.get("path"), str):
        raise ParityError(f"readout.json's source.adapter is {str(adapter)[:80]}, not an adapter directory and its "
                          "files")
    root = Path(adapter["path"])
    if not root.is_dir():
        raise ParityError(f"adapter directory {root} (recorded in readout.json) is not on this machine; the eager "
                          "reference needs it")
    files = _verify_files(root, adapter.get("files") or [], "adapter files")
    if weights_digest(files) != art.record["provenance"].get("adapter_sha256"):
        raise ParityError("adapter files do not add up to the artifact's adapter_sha256")


def reference_graph(art: Artifact, adapter_form: str = "applied", head_as_saved: bool = False) -> Any:
    """The eager torch graph (backbone/head + readout) the artifact was exported from. An adapter runs unmerged
    in peft (``applied``), as it was trained: the exported graphs carry it merged, so parity compares the merge
    against an oracle that did not go through it (``merged``: the graph the build exported). ``head_as_saved``:
    a decoder head runs as the checkpoint was saved, transformers' own row rule on each example alone
    (`readout_export.graph.loader.as_saved`), not the exported graph's gather by the mask, so parity measures
    the row the artifact reads against the row the checkpoint reads."""
    from readout_export.build import assemble
    from readout_export.errors import BuildError
    from readout_export.graph.loader import as_saved
    from readout_export.planning.resolve import resolve_kept

    root = verify_source(art)
    try:
        plan = resolve_kept(art, root, "parity-reference")
    except BuildError as e:
        raise ParityError(str(e)) from None
    graph, _ = assemble(plan, adapter_form=adapter_form)
    if head_as_saved:
        graph.core = as_saved(graph.core)
    return graph


class EagerRunner(Lifecycle):
    """The eager graph behind the runner protocol (`readout_sdk.runners.Runner`). ``default_positions``
    turns off mask-derived positions: transformers' own behaviour, for the informative left-padding row."""

    backend = "torch"
    device = "cpu"
    providers = ("torch",)
    streams = 1

    def __init__(self, graph: Any, output_names: Sequence[str], default_positions: bool = False):
        self.graph = graph
        self.output_names = list(output_names)  # the graph's outputs, in the record's order
        self.default_positions = default_positions
        self.execution = {"provider": "torch", "positions": "default" if default_positions else "rank_among_valid_rows"}

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        import torch

        self._open()
        self.graph.compact_rows = not self.default_positions
        try:
            with torch.no_grad():
                out = self.graph(**{k: torch.from_numpy(v) for k, v in feed.items()})
        finally:
            self.graph.compact_rows = True
        out = out if isinstance(out, tuple) else (out,)
        by_name = dict(zip(self.output_names, (o.numpy() for o in out)))
        return [by_name[n] for n in names]

    def embedded_metadata(self) -> dict[str, str]:
        self._open()
        return {}  # an eager graph carries no record; it is rebuilt from the one the artifact keeps

    def _release(self) -> None:
        self.graph = None


def eager_reference(art: Artifact) -> Reference:
    """Eager PyTorch as the parity reference, with transformers' default position ids reported beside it."""
    from readout_export.graph.loader import AsSavedCore, YesNoAsSavedCore
    from readout_sdk.families import multi_output

    if multi_output.is_multi(art.record):  # each output against its published formula, not the exported stages
        from readout_export.family_outputs import REFERENCE as FORMULAS, FormulaRunner

        return Reference(FormulaRunner(art, verify_source(art)), FORMULAS)
    graph = reference_graph(art, head_as_saved=True)
    names = [o["name"] for o in art.record["outputs"]]
    described = REFERENCE + (", the peft adapter applied unmerged" if art.source.get("adapter") else "")
    if isinstance(graph.core, AsSavedCore):  # the row the checkpoint reads is transformers' own, not the gather
        described += (", the causal LM as saved: next-token logits at each text's last position, softmax over "
                      "[no, yes]" if isinstance(graph.core, YesNoAsSavedCore) else
                      ", the head as saved (transformers' own row rule, config untouched)")
    return Reference(EagerRunner(graph, names), described,
                     ((DEFAULT_POSITIONS, EagerRunner(graph, names, default_positions=True)),))


def check_parity(path: str | Path, corpus: str | Path | None = None, widths: Sequence[int] | None = None,
                 say: Any = None, only: Sequence[str] | None = None) -> Report:
    """`readout-export parity`: reconciliation of the semantic record with the source model, then the
    artifact's targets against eager PyTorch (see `run_parity`); reconciliation's checks come first."""
    from readout_export.reconcile import reconcile

    art = open_artifact(path)
    recon = reconcile(art)
    for line in recon.lines():
        (say or (lambda _m: None))(line)
    reference = eager_reference(art)
    kwargs: dict[str, Any] = {"corpus": corpus, "reference": reference, "only": only}
    if widths is not None:
        kwargs["widths"] = widths
    if say is not None:
        kwargs["say"] = say
    try:
        report = run_parity(path, **kwargs)
    finally:
        reference.close()
    report.checks = recon.checks() + report.checks
    report.reconciliation = recon.to_json()
    return report
