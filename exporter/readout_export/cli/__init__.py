"""`readout-export`: thin click commands over the library, one module per group of commands: `main`
(build, validate, inspect, parity, bench, compile), `release` (verify, diff, promote), `scale` (triton,
serve, encode), `evaluate` (evaluate, calibrate), `trust` (keygen, sign); `run` turns every failure into one
line and its exit code."""
from readout_export.cli import evaluate, release, scale, trust
from readout_export.cli.main import main

for _command in (*release.COMMANDS, *scale.COMMANDS, *evaluate.COMMANDS, *trust.COMMANDS):
    main.add_command(_command)

__all__ = ["main"]
