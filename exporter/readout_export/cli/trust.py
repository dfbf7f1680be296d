"""Signing commands: `keygen` (an Ed25519 key pair) and `sign` (a signature over an artifact's
readout.json, which lists every other file by sha256), and the `--trusted-key` option every command that
opens an artifact for use shares (`readout_sdk.release.signing` holds the format and the policy)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click

from readout_export.cli.run import ARTIFACT_DIR, FilePath, run_command


def trusted_key_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--trusted-key PATH`` (repeatable): the signature policy for this command."""
    return click.option(
        "--trusted-key", "trusted_keys", multiple=True, type=FilePath(dir_okay=True),
        help="Refuse an artifact unless this Ed25519 public key (a PEM or OpenSSH file, or a directory of "
             ".pub/.pem files) signed it; repeatable. Default: the keys READOUT_TRUSTED_KEYS names, if any.")(fn)


def policy(trusted: tuple[str, ...]) -> tuple[Any, ...]:
    """The keys the policy trusts: the option's, else the environment's (none: no policy)."""
    from readout_sdk.release.signing import trusted_keys

    return trusted_keys(list(trusted) or None)


@click.command()
@click.argument("path", type=FilePath())
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def keygen(path: str, debug: bool) -> None:
    """Write a new Ed25519 signing key to PATH (mode 0600) and its public key to PATH.pub.

    Give PATH.pub to whoever deploys your artifacts (`--trusted-key`, READOUT_TRUSTED_KEYS); keep PATH
    secret. With READOUT_SIGNING_KEY_PASSWORD set, the private key is encrypted with it. Existing files
    are never replaced. Needs the sign extra.
    """
    from readout_sdk.release.signing import generate

    private, public, kid = run_command(debug, False, lambda: generate(path))
    click.echo(f"wrote {private} (private: keep it secret) and {public} (public: give it to deployers); key {kid}")


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--key", "key_path", envvar="READOUT_SIGNING_KEY", show_envvar=True, required=True,
              type=FilePath(), help="The Ed25519 private key (`readout-export keygen`).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def sign(artifact: str, key_path: str, debug: bool) -> None:
    """Sign ARTIFACT: an Ed25519 signature over its readout.json (which lists every other file by sha256),
    added to readout.sig.

    The artifact is verified first (every hash, every embedded record): only a consistent artifact is
    signed. Sign last: anything that rewrites readout.json afterwards (parity, evaluate, promote) leaves
    the signature over the old one, and the signature policy then refuses the artifact until it is signed
    again. Needs the sign extra.
    """
    from readout_sdk.artifact import ArtifactError, open_artifact
    from readout_sdk.release.signing import read_private_key, sign_bytes

    def go():
        key = read_private_key(key_path)
        root = Path(artifact)
        before = (root / "readout.json").read_bytes()
        art = open_artifact(root)  # hashes and embedded records: what is signed must be what verifies
        if (root / "readout.json").read_bytes() != before:
            raise ArtifactError(f"{root / 'readout.json'}: changed while it was being verified; sign again")
        release = art.identity.release_id if art.identity else None
        return sign_bytes(root, before, release, key), release

    (signature, dropped), release = run_command(debug, False, go)
    for line in dropped:
        click.echo(f"  {line}", err=True)
    click.echo(f"signed {artifact} (release {str(release)[:12]}) with {signature.key_id}; readout.sig holds the "
               "signature")


COMMANDS = (keygen, sign)
