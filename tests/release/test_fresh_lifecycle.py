"""A fresh build states its lifecycle without looking for evidence (`lifecycle.fresh`); what it states must
be what deriving it from the build's staging directory finds there (`lifecycle.derive_from`, the oracle),
with or without a layered identity, so `verify` and `inspect` agree with readout.json from the first build."""
from __future__ import annotations

import pytest

from readout_sdk.release.lifecycle import derive_from, fresh


@pytest.mark.parametrize("identity", [{"release_id": "ab" * 32}, None])
def test_a_fresh_builds_lifecycle_is_what_its_empty_staging_directory_derives(tmp_path, identity):
    staging = tmp_path / ".minilm.partial-x1"  # how `readout_sdk.staging.staged` names a build's directory
    staging.mkdir()
    record = {"family": "embedding", **({"identity": identity} if identity else {})}
    stated, derived = fresh(record), derive_from(staging, record, {})
    assert stated.to_json() == derived.to_json()
    assert stated.state == "DRAFT" and stated.missing and not stated.rests_on
