"""readout_export: build versioned readout artifacts (ONNX graphs with the readout inside).

Entry points: :func:`readout_export.build.build` and the ``readout-export`` command.
"""
__version__ = "0.1.0"
