"""readout_parity: the parity harness — compiled targets against eager PyTorch, per family.

`run_parity(artifact)` runs every target x execution provider x padding side x batch width on real
text and decides each budgeted metric (PASS / FAIL / NOT_EVALUATED); `readout-export parity` is the
command. Budgets: abi_specs/parity-budgets-1.json, overridable per precision by the manifest's
`parity` section.
"""
from readout_parity.checks import FAIL, NOT_EVALUATED, PASS, Check
from readout_parity.harness import Report, run_parity

__all__ = ["Check", "FAIL", "NOT_EVALUATED", "PASS", "Report", "run_parity"]
