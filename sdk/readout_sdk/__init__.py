"""readout_sdk: the thin, torch-free side of readout-export.

This package owns the ABI types (`readout_sdk.abi`) and artifact reading and verification
(`readout_sdk.artifact`). The exporter and the parity harness import from here, never the other way.
"""
from readout_sdk.abi import (
    ABI_VERSION,
    FAMILIES,
    AbiError,
    FamilySpec,
    TensorSpec,
    family_spec,
    validate_record,
)
from readout_sdk.artifact import Artifact, ArtifactError, open_artifact

__all__ = [
    "ABI_VERSION",
    "FAMILIES",
    "AbiError",
    "Artifact",
    "ArtifactError",
    "FamilySpec",
    "TensorSpec",
    "family_spec",
    "open_artifact",
    "validate_record",
]
__version__ = "0.1.0"
