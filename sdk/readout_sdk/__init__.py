"""readout_sdk: the thin, torch-free runtime of readout-export.

``readout_sdk.load(path)`` verifies an artifact and returns an :class:`Engine` whose calls return
typed results (vectors, labels, entities with character offsets, answer spans, scores). This package
also owns the ABI types (`readout_sdk.abi`) and artifact verification (`readout_sdk.artifact`); the
exporter and the parity harness import from here, never the other way.
"""
from readout_sdk.abi import (
    ABI_VERSION,
    FAMILIES,
    AbiError,
    TensorSpec,
    validate_record,
)
from readout_sdk.artifact import Artifact, ArtifactError, open_artifact
from readout_sdk.engine import Engine, load
from readout_sdk.errors import (BadArgument, BelowPolicy, Busy, Closed, DeviceUnavailable, DraftWarning, FormError,
                                InputRefused, MissingExtra, SdkError, UnknownName, WindowError, WrongCall,
                                WrongItem)
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, Entity, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)

# the public surface, as docs/reference/api.md lists it (generated from this list; a test keeps them equal)
__all__ = [
    "ABI_VERSION", "FAMILIES", "AbiError", "Answer", "Artifact", "ArtifactError", "BadArgument", "BelowPolicy", "Busy",
    "Choice", "Classification", "Closed", "DeviceUnavailable", "DraftWarning", "Embeddings", "Engine", "Entity",
    "FormError", "InputRefused", "MissingExtra", "MultiLabel", "Regression", "Scored", "SdkError", "SparseVector", "TaggedText", "TensorSpec", "TokenVectors",
    "UnknownName", "WindowError", "WrongCall", "WrongItem", "load", "open_artifact", "validate_record",
]
__version__ = "0.1.0"
