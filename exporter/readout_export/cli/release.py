"""Release-identity commands: `verify` (no model runs), `diff` (what a new release breaks) and
`promote` (an EVALUATED artifact becomes a CANDIDATE with its compatibility record)."""
from __future__ import annotations

import json
import sys

import click

from readout_export.cli.run import ARTIFACT_DIR, require_export_extra, run_command
from readout_export.cli.trust import policy, trusted_key_option


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (reconciliation field by field).")
@click.option("--strict", is_flag=True, help="Exit 1 when reconciliation is NOT_EVALUATED (source model absent).")
@trusted_key_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def verify(artifact: str, as_json: bool, strict: bool, trusted_keys: tuple[str, ...], debug: bool) -> None:
    """Check ARTIFACT without running a model: its signatures, file hashes, embedded records, layered
    identity, the lifecycle state against its evidence, and reconciliation of the semantic record with the
    recorded source model and the kept build manifest.

    Hashes catch a file changed on its own; only a signature by a key you trust catches an artifact
    rewritten with its hashes recomputed (docs/trust.md). Under a signature policy (--trusted-key, or
    READOUT_TRUSTED_KEYS) an artifact that no trusted key signed is refused.

    Exit 0 when nothing failed, 1 on a reconciliation FAIL or a lifecycle state its evidence does not
    support (and with --strict when reconciliation is NOT_EVALUATED), 2 on an unreadable artifact or one
    the signature policy refuses.
    """
    def go():
        from readout_sdk.artifact import open_artifact, read_meta_bytes
        from readout_sdk.release.lifecycle import Lifecycle, derive
        from readout_sdk.release.signing import examine

        keys = policy(trusted_keys)
        require_export_extra()
        from readout_export.reconcile import reconcile

        art = open_artifact(artifact, trusted=keys)
        signatures = examine(art.path, read_meta_bytes(art.path)[1]) if not keys else None
        recon, state = reconcile(art), derive(art)
        if recon.decision == "FAIL" and state.state != "DRAFT":
            # the kept evidence passed reconciliation once; the source has changed since, so it supports nothing
            # now: one verdict, not "reconciliation FAIL" and then a state that rests on it having passed
            state = Lifecycle("DRAFT", [], [f"reconciliation with the source model: FAIL now (the kept parity.json "
                                            f"passed it; it supported {state.state}): rebuild, then run parity"])
        return art, recon, state, signatures

    art, recon, state, signatures = run_command(debug, as_json, go)
    signed = (f"signed by trusted key {art.signed_by}" if art.signed_by else signatures.line())
    stored = (art.extra.get("lifecycle") or {}).get("state")
    lifecycle_ok = stored in (None, state.state)
    ident = art.identity
    if as_json:
        click.echo(json.dumps({"ok": recon.decision == "PASS" and lifecycle_ok, "path": str(art.path),
                               "release_id": ident.release_id if ident else None, "signatures": signed,
                               "reconciliation": recon.to_json(), "lifecycle": state.to_json(),
                               "lifecycle_kept": stored}, indent=2, default=str))
    else:
        click.echo(f"{art.path}: hashes and embedded records verified; release "
                   f"{ident.short() if ident else 'unknown (built before readout-identity/1)'}")
        click.echo(f"  signatures {signed}")
        for line in recon.lines():
            click.echo(f"  {line}")
        click.echo(f"  lifecycle {state.state}" + (f" (missing: {'; '.join(state.missing)})" if state.missing else ""))
        if not lifecycle_ok and recon.decision != "FAIL":  # a failed reconciliation has said why, above: one verdict
            click.echo(f"  lifecycle FAIL: readout.json says {stored}, but its evidence supports {state.state}")
    failed = recon.decision == "FAIL" or not lifecycle_ok or (strict and recon.decision == "NOT_EVALUATED")
    sys.exit(1 if failed else 0)


@click.command()
@click.argument("a", type=ARTIFACT_DIR)
@click.argument("b", type=ARTIFACT_DIR)
@click.option("--json", "as_json", is_flag=True, help="Print the diff as one JSON object.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def diff(a: str, b: str, as_json: bool, debug: bool) -> None:
    """Compare two artifacts layer by layer (tokenizer, contextual, readout, head, calibration, decision):
    which fields changed, which caches that invalidates, and each target's parity evidence.

    Exit 0 when nothing changed, 1 when a semantic layer or a declared vector form did, 2 on bad input.
    """
    from readout_sdk.artifact import ArtifactError, open_artifact
    from readout_sdk.release.compat import diff as do_diff, text
    from readout_sdk.errors import SdkError

    def go():
        try:
            return do_diff(open_artifact(a), open_artifact(b))
        except SdkError:
            raise
        except Exception as e:  # noqa: BLE001 - exit 1 means "a layer changed": any failure must be 2
            raise ArtifactError(f"cannot compare {a} and {b}: {type(e).__name__}: {e}") from None

    doc = run_command(debug, as_json, go)
    click.echo(json.dumps(doc, indent=2, default=str) if as_json else text(doc))
    sys.exit(0 if doc["same"] else 1)


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--parent", required=True, type=ARTIFACT_DIR,
              help="The release this one replaces (its rollback target); must be at least RECONCILED.")
@click.option("--json", "as_json", is_flag=True, help="Print the compatibility record as JSON.")
@trusted_key_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def promote(artifact: str, parent: str, as_json: bool, trusted_keys: tuple[str, ...], debug: bool) -> None:
    """Make ARTIFACT a CANDIDATE: write compatibility.json (diff against PARENT, cache-invalidation plan,
    rollback target with the parent's release id and file hashes) atomically into ARTIFACT.

    Refuses (exit 2) an artifact that is not EVALUATED, or a parent that is not at least RECONCILED,
    naming what is missing; under a signature policy (--trusted-key, READOUT_TRUSTED_KEYS), either one
    unsigned by a trusted key. Promoting rewrites readout.json: sign the artifact afterwards.
    """
    from readout_export.promote import promote as do_promote

    doc = run_command(debug, as_json, lambda: do_promote(artifact, parent, policy(trusted_keys)))
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    click.echo(f"{artifact}: CANDIDATE (release {doc['release_id'][:12]}, rollback target "
               f"{doc['rollback']['release_id'][:12]} at {doc['rollback']['path']})")
    for step in doc["invalidation_plan"]:
        click.echo(f"  {step['action']:<8} {step['cache']}: {step['what']}")


COMMANDS = (verify, diff, promote)
