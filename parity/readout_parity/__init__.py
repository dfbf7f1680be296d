"""readout_parity: the parity harness — compiled targets against a reference runner, per family.

`run_parity(artifact, reference=...)` runs every target x execution provider x padding side x batch
width on real text and decides each budgeted metric (PASS / FAIL / NOT_EVALUATED); `readout-export
parity` is the command, with eager PyTorch as the reference (built by the exporter,
`readout_export.reference`). Budgets: abi_specs/parity-budgets-1.json, overridable per precision by
the manifest's `parity` section. This package imports only `readout_sdk`.
"""
from readout_parity.checks import FAIL, NOT_EVALUATED, PASS, Check, ParityError
from readout_parity.harness import Reference, Report, onnx_reference, run_parity

__all__ = ["Check", "FAIL", "NOT_EVALUATED", "PASS", "ParityError", "Reference", "Report", "onnx_reference",
           "run_parity"]
