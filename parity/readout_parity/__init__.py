"""readout_parity: the parity harness (compiled backends against eager PyTorch, per family).

Only the package exists in this release; the harness and `readout-export parity` are the parity
issue's work. Until then `readout-export inspect` reports parity as NOT_EVALUATED.
"""
