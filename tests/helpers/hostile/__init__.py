"""Hostile inputs for readout-export and the contract every outcome is held to (the reliability sweep),
one module per thing attacked:

* :mod:`helpers.hostile.manifests`: malformed manifests and model directories, through the CLI.
* :mod:`helpers.hostile.artifacts`: mutated copies of one built artifact on disk, opened by the SDK and ``inspect``.
* :mod:`helpers.hostile.sdk_inputs`: hostile texts, wrong types and wrong argument values for every family's calls.

They share :mod:`helpers.hostile.contract` (the Outcome classes REFUSED / OK / BAD, how an exception or a CLI
exit is classified, :func:`~helpers.hostile.contract.explore`) and :mod:`helpers.hostile.values` (hostile JSON
values and path helpers). Each case yields an Outcome: REFUSED (a documented refusal), OK (a valid result) or
BAD (accepted though meaningless, a wrong exception type, a traceback, a panic, a wrong exit code).
``explore`` runs fixed cases and then ``budget`` generated ones with a fixed seed; the property tests
(tests/sdk/test_hostile.py) assert it finds no BAD, and ``benchmarks/probe.py`` counts them. Signed-release
forgeries have their own seeded sweep (tests/release/test_hostile_sweep.py).
"""
