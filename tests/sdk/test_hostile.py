"""The reliability sweep: hostile manifests, mutated artifacts and hostile SDK inputs, each outcome held
to the contract in tests/helpers/hostile/ (a documented refusal or a valid result; never a wrong exception
type, a traceback, a panic, a wrong exit code, or something meaningless accepted).

The default run takes every fixed named case and a CI-sized generated budget with a fixed seed;
``pytest -m fuzz tests/sdk/test_hostile.py`` runs larger budgets. ``benchmarks/probe.py`` counts the same
generators' outcomes. Models: SYNTHETIC tiny models (tests/helpers/synthetic.py) and REAL all-MiniLM-L6-v2 and
SPLADE, through the session's shared artifacts (tests/helpers/sdk_fixtures.py).
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from helpers.hostile.artifacts import (artifact_cases, artifact_env as prepared_artifact_env, artifact_fixed,
                                       ArtifactCase, run_artifact_case)
from helpers.hostile.contract import BAD, EITHER, OK, REFUSE, explore, report
from helpers.hostile.manifests import (PROCESS_CASES, manifest_cases, manifest_fixed, ManifestCase, ManifestEnv,
                                       run_manifest_case, run_manifest_process)
from helpers.hostile.sdk_inputs import SDK_KEYS, Call, engine_cache, run_sdk_case, sdk_calls, sdk_fixed, sdk_seed
from helpers import synthetic
from readout_export.cli import main

SEED = 15
BUDGET = {"manifest": 100, "artifact": 50, "sdk": 40}  # generated cases per test in the default run
FUZZ = {"manifest": 1500, "artifact": 400, "sdk": 500}  # pytest -m fuzz


def assert_no_bad(outcomes: list) -> None:
    assert not [o for o in outcomes if o.kind == BAD], report(outcomes)


def assert_not_bad(outcome) -> None:
    assert outcome.kind != BAD, f"{outcome.detail}\n  input: {outcome.input}"


@pytest.fixture(scope="session")
def manifest_env(shared, tmp_path_factory):
    models = {"classify": shared("classify")[0], "multilabel": shared("multilabel")[0], "qa": shared("qa")[0],
              "minilm": synthetic.minilm_path()}
    return ManifestEnv(models, tmp_path_factory.mktemp("hostile-manifests"))


@pytest.fixture(scope="session")
def artifact_env(shared, tmp_path_factory):
    """The shared classifier artifact with kept reports (a real parity.json), and what it predicts."""
    return prepared_artifact_env(shared("classify")[1], tmp_path_factory.mktemp("hostile-artifacts"))


@pytest.fixture(scope="session")
def engines(shared):
    return engine_cache(lambda key: shared(key)[1])


# ---- manifests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["classify", "multilabel", "qa", "embedding", "minimal"])
def test_base_manifests_are_valid(manifest_env, name):
    """The manifests mutations start from are valid, so that a refusal is the mutation's doing."""
    doc = manifest_env.minimal() if name == "minimal" else manifest_env.bases()[name]
    case = ManifestCase(f"base {name}", lambda d, env: json.dumps(doc).encode(), EITHER)
    outcome = run_manifest_case(case, manifest_env)
    assert outcome.kind == OK, outcome.detail


@pytest.mark.parametrize("case", manifest_fixed(), ids=lambda c: c.label)
def test_manifest_named(manifest_env, case):
    """Exit 2 with one `error: $...` line (validate; build too where validate accepts a destination)."""
    assert_not_bad(run_manifest_case(case, manifest_env))


def test_manifest_generated(manifest_env):
    assert_no_bad(explore(manifest_cases(manifest_env),
                          lambda c: run_manifest_case(c, manifest_env), BUDGET["manifest"], SEED))


@pytest.mark.fuzz
def test_manifest_generated_fuzz(manifest_env):
    assert_no_bad(explore(manifest_cases(manifest_env),
                          lambda c: run_manifest_case(c, manifest_env), FUZZ["manifest"], SEED + 1))


@pytest.mark.parametrize("label", PROCESS_CASES)
def test_manifest_in_a_real_process(manifest_env, label):
    """The same contract through a real process: real stdio encodings, real exit codes."""
    case = next(c for c in manifest_fixed() if c.label == label)
    assert_not_bad(run_manifest_process(case, manifest_env))


@pytest.mark.parametrize("case", [c for c in manifest_fixed() if c.destination], ids=lambda c: c.label)
def test_build_refuses_destinations_in_one_line(manifest_env, case):
    """build on a destination validate refuses: the same one-line refusal, and nothing written."""
    assert_not_bad(run_manifest_case(case, manifest_env, command="build")) if case.expect == REFUSE \
        else pytest.skip("a valid destination (checked by test_manifest_named)")


# ---- artifacts ------------------------------------------------------------------------------------
def test_pristine_artifact_with_kept_reports(artifact_env):
    """The artifact mutations start from: it loads, predicts its reference, and inspects with exit 0."""
    case = ArtifactCase("pristine", lambda art, env: None, EITHER)
    outcome = run_artifact_case(case, artifact_env)
    assert outcome.kind == OK, outcome.detail
    result = CliRunner().invoke(main, ["inspect", str(artifact_env.pristine)])
    assert result.exit_code == 0 and "parity" in result.stdout, result.output


@pytest.mark.parametrize("case", artifact_fixed(), ids=lambda c: c.label)
def test_artifact_named(artifact_env, case):
    """Loads and predicts as the pristine artifact, or ArtifactError naming a file and inspect exit 2."""
    assert_not_bad(run_artifact_case(case, artifact_env))


def test_artifact_generated(artifact_env):
    assert_no_bad(explore(artifact_cases(artifact_env),
                          lambda c: run_artifact_case(c, artifact_env), BUDGET["artifact"], SEED))


@pytest.mark.fuzz
def test_artifact_generated_fuzz(artifact_env):
    assert_no_bad(explore(artifact_cases(artifact_env),
                          lambda c: run_artifact_case(c, artifact_env), FUZZ["artifact"], SEED + 1))


# ---- SDK inputs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("call", sdk_fixed(), ids=lambda c: f"{c.key}:{c.label}")
def test_sdk_named(engines, call):
    """A valid result or TypeError / ValueError (naming the item); never a panic or another exception."""
    assert_not_bad(run_sdk_case(call, engines))


@pytest.mark.parametrize("key", SDK_KEYS)
def test_sdk_generated(engines, key):
    assert_no_bad(explore(sdk_calls(key), lambda c: run_sdk_case(c, engines),
                          BUDGET["sdk"], sdk_seed(SEED, key)))


@pytest.mark.fuzz
@pytest.mark.parametrize("key", SDK_KEYS)
def test_sdk_generated_fuzz(engines, key):
    assert_no_bad(explore(sdk_calls(key), lambda c: run_sdk_case(c, engines),
                          FUZZ["sdk"], sdk_seed(SEED + 1, key)))


def test_a_panic_is_classed_bad(engines):
    """The harness catches BaseException: a Rust panic (pyo3_runtime.PanicException) is BAD, never a crash."""
    class Panicking:
        def classify(self, texts, **kw):
            raise type("PanicException", (BaseException,), {})("stride must be strictly less than max_len")

    call = Call("classify", "classify", (["x"],))
    outcome = run_sdk_case(call, lambda key: Panicking())
    assert outcome.kind == BAD and "PanicException" in outcome.detail
