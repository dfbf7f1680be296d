"""readout-geometry: a plugin readout family for readout-export (see examples/plugins/README.md).

``readout_geometry.family`` is the family (torch-free: what the SDK runs); ``readout_geometry.head`` the
geometry head as a torch module (what the exporter traces into the graph, and what parity compares with);
``readout_geometry.distance`` each arm's distance in numpy (what the SDK scores with).
"""
