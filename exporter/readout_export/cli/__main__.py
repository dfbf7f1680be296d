"""`python -m readout_export.cli`: the `readout-export` command."""
from readout_export.cli import main

main()
