"""Deprecated: moved to `readout_sdk.release.identity` (this path goes in the next release)."""
from readout_sdk._moved import alias

alias(__name__, "readout_sdk.release.identity")
