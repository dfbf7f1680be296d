"""Deprecated: moved to `readout_sdk.serving.triton_model` (this path goes in the next release)."""
from readout_sdk._moved import alias

alias(__name__, "readout_sdk.serving.triton_model")
