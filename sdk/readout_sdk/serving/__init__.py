"""Serving, generic over the family registry: one record shape per family (`records`), the PyTriton
binding (`serve`), the generated Triton repository's Python model (`triton_model`) and Ray Data (`ray`); the HTTP server (`http`)."""

# public modules (docs/reference/api.md); `from readout_sdk.serving import *` imports them
__all__ = ["http", "ray", "records", "serve", "triton_model"]
