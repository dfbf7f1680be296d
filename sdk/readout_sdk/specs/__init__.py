"""The JSON Schemas and the ABI text shipped with the SDK (read with importlib.resources)."""
