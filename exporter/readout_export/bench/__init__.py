"""readout-export bench: peers and this SDK side by side, in one run."""
