"""Release identity and lifecycle, torch-free: the layered identity and cache keys (`identity`), diff and
invalidation between releases (`compat`), the lifecycle state a release's evidence supports
(`lifecycle`), the kept parity/bench/evaluation reports (`evidence`) and whether stored outputs are still
valid for an engine (`stored`)."""
