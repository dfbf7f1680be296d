"""Release identity and lifecycle, torch-free: the layered identity and cache keys (`identity`), diff and
invalidation between releases (`compat`), the lifecycle state a release's evidence supports
(`lifecycle`), the kept parity/bench/evaluation reports (`evidence`) and whether stored outputs are still
valid for an engine (`stored`); signed releases and the trust policy (`signing`)."""

# public modules (docs/reference/api.md); `from readout_sdk.release import *` imports them
__all__ = ["compat", "evidence", "identity", "lifecycle", "signing", "stored"]
