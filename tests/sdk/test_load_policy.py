"""The load policy (issue 48 point 2): a deployment refuses artifacts below a lifecycle state; without a
policy a DRAFT artifact loads with one warning per release and process."""
from __future__ import annotations

import warnings

import pytest
from click.testing import CliRunner

import readout_sdk
from readout_sdk.engine import policy
from readout_sdk.errors import BelowPolicy, DraftWarning, SdkError
from readout_export.cli.main import main

from helpers.artifacts import linked_copy


@pytest.fixture
def draft(shared, tmp_path, monkeypatch):
    monkeypatch.delenv(policy.ENVIRONMENT, raising=False)
    monkeypatch.setattr(policy, "_warned", set())
    return linked_copy(shared("classify")[1], tmp_path / "draft")


def test_a_draft_loads_with_one_warning_per_release(draft):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        readout_sdk.load(draft).close()
        readout_sdk.load(draft).close()
    drafts = [w for w in caught if issubclass(w.category, DraftWarning)]
    assert len(drafts) == 1 and "is DRAFT" in str(drafts[0].message) and "readout-export parity" in str(drafts[0].message)


def test_the_policy_refuses_a_draft_naming_the_fix(draft, monkeypatch):
    with pytest.raises(BelowPolicy, match="DRAFT, below the load policy RECONCILED .*readout-export parity"):
        readout_sdk.load(draft, min_state="RECONCILED")
    monkeypatch.setenv(policy.ENVIRONMENT, "RECONCILED")  # a deployment's setting reaches every load
    with pytest.raises(BelowPolicy, match=policy.ENVIRONMENT):
        readout_sdk.load(draft)
    with pytest.raises(SdkError, match="did you mean 'RECONCILED'"):
        readout_sdk.load(draft, min_state="RECONCILD")


def test_after_parity_the_policy_loads_it_without_a_word(draft, monkeypatch):
    assert CliRunner().invoke(main, ["parity", str(draft), "--widths", "7", "-q"]).exit_code == 0
    monkeypatch.setenv(policy.ENVIRONMENT, "RECONCILED")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        readout_sdk.load(draft).close()
    assert not [w for w in caught if issubclass(w.category, DraftWarning)]
    with pytest.raises(BelowPolicy, match="RECONCILED, below the load policy EVALUATED"):
        readout_sdk.load(draft, min_state="EVALUATED")
