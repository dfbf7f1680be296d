"""Planning: a manifest (`manifest`) checked against what its model directory declares (`source`) into
one resolved build plan (`resolve`, `plan`), every problem reported with its JSON path (`problems`), the
output directory checked before anything is written (`destination`), the per-family hooks planning
and the graph need (`family_hooks`), a manifest's `peft` adapter checked against the base without weights
(`adapter`), and a model directory's own code, opt-in only (`remote_code`)."""
