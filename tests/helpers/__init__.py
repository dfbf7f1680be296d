"""What the tests share: SYNTHETIC model makers (`synthetic`), the session's shared artifacts
(`sdk_fixtures`), independent oracles (`oracles`, `squad_v2_official`), texts (`corpus`), artifact copies
(`artifacts`), the measured-error tables (`measured`), the docs' code blocks (`docblocks`), the hostile
sweep (`hostile`), a Triton stand-in (`triton_server`, `client`). No test file imports another."""
