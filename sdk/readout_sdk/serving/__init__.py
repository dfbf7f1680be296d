"""Serving, generic over the family registry: one record shape per family (`records`), the PyTriton
binding (`serve`), the generated Triton repository's Python model (`triton_model`) and Ray Data (`ray`)."""
