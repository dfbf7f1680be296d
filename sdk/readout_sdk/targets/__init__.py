"""The target registry, the counterpart of `readout_sdk.families`: what each kind of compiled graph is
(`kinds`), the backends that run graphs (`backends`), the `Target` an artifact lists (`target`), and the
one runner factory (`open`). Nothing outside this package decides by comparing a precision, format or
runtime name; it asks a kind.

Adding a target kind: one `TargetKind` entry in `kinds.KINDS`, an exporter recipe in
`readout_export.targets` if it is produced a new way, the schema enums, and tests (see docs/architecture.md).
"""
from readout_sdk.targets.backends import BACKENDS, Backend, backend, installed
from readout_sdk.targets.kinds import (FORMATS, FP32_GRAPH, KINDS, PRECISIONS, RUNTIMES, TargetKind, default_runtime,
                                       kind_of, onnx_source, precision_rank, target_name)
from readout_sdk.targets.open import open_runner, ways_to_run
from readout_sdk.targets.target import Target

__all__ = ["BACKENDS", "Backend", "FORMATS", "FP32_GRAPH", "KINDS", "PRECISIONS", "RUNTIMES", "Target", "TargetKind",
           "backend", "default_runtime", "installed", "kind_of", "onnx_source", "open_runner", "precision_rank",
           "target_name", "ways_to_run"]

