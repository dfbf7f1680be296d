"""The eager PyTorch reference: the artifact's own readout, rebuilt from the source model it records."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from readout_sdk.artifact import Artifact, sha256_file


class ParityError(RuntimeError):
    """The reference cannot be built (missing source, changed weights)."""


def verify_source(art: Artifact) -> Path:
    """The source model directory, after checking every weight file against the artifact's hashes."""
    from readout_export.record import weights_digest

    root = Path(art.source.get("model", ""))
    if not root.is_dir():
        raise ParityError(f"source model {root} (recorded in readout.json) is not on this machine; "
                          "the eager reference needs it")
    files = []
    for w in art.source.get("weights", []):
        path = root / w["file"]
        if not path.is_file():
            raise ParityError(f"source weight file {path} is missing")
        actual = sha256_file(path)
        if actual != w["sha256"]:
            raise ParityError(f"source weights changed since the build: {w['file']} has sha256 {actual}, the "
                              f"artifact was built from {w['sha256']}; refusing to compare against other weights")
        files.append((w["file"], actual))
    if weights_digest(files) != art.record["provenance"]["weights_sha256"]:
        raise ParityError("source weights do not add up to the artifact's weights_sha256")
    return root


def reference_graph(art: Artifact) -> Any:
    """The eager torch graph (backbone/head + readout) the artifact was exported from."""
    from readout_export.build import assemble
    from readout_export.manifest import Manifest
    from readout_export.resolve import resolve

    root = verify_source(art)
    data = dict(art.extra.get("build", {}).get("manifest") or {})
    if not data:
        raise ParityError("readout.json keeps no build manifest; rebuild the artifact with this readout-export")
    data["model"] = str(root)
    data["output_dir"] = str(art.path.parent / f".{art.path.name}.parity-reference")  # never written
    plan = resolve(Manifest(data, art.path / "manifest.json"))
    graph, _ = assemble(plan)
    return graph


def run_eager(graph: Any, feed: dict[str, Any], names: list[str], default_positions: bool = False) -> dict[str, Any]:
    """Run the eager graph on numpy feeds; ``default_positions`` turns off mask-derived positions."""
    import torch

    graph.compact_rows = not default_positions
    try:
        with torch.no_grad():
            out = graph(**{k: torch.from_numpy(v) for k, v in feed.items()})
    finally:
        graph.compact_rows = True
    out = out if isinstance(out, tuple) else (out,)
    return {n: o.numpy() for n, o in zip(names, out)}
