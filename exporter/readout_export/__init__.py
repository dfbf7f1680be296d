"""readout_export: build versioned readout artifacts (ONNX graphs with the readout inside).

Entry points: :func:`readout_export.build.build` and the ``readout-export`` command.
"""
# public modules (docs/reference/api.md): the build, the command, the errors it reports, the eager reference
# runner; the rest (planning, graph, targets, bench, ...) is internal. Not imported here: building needs torch.
__all__ = ["build", "cli", "errors", "reference"]
__version__ = "0.1.0"
