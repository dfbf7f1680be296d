"""Signed releases: an Ed25519 signature over ``readout.json``, and the policy that refuses what the
deployer's keys did not sign.

What hashes alone protect against, and what they do not: readout.json lists the sha256 of every file the
artifact runs or reads (the tokenizer, each graph, each kept report), so a file damaged or swapped on its
own is refused. But whoever can write the artifact can rewrite those hashes too: a graph, a label map, a
calibration or a kept evaluation edited *with its hash recomputed* is self-consistent, and only a
signature by a key the attacker does not hold tells it apart.

A signature signs the sha256 of readout.json's bytes; since readout.json lists every other file by
sha256, and `load` runs exactly the bytes it hashed, one signature covers the whole artifact. It lives
beside them in ``readout.sig`` (it cannot be listed in the file it signs), a JSON document that may hold
several signatures (one per key). Anything that rewrites readout.json afterwards (a new parity run, a
promotion) leaves the signature over the *old* readout.json: the artifact is then unsigned in effect
and must be signed again. Sign last.

The policy: ``trusted_keys`` (a load argument, ``--trusted-key`` on the commands, else the
``READOUT_TRUSTED_KEYS`` environment variable: key files or directories of them, separated by ``:``).
Where it names keys, an artifact is refused unless one of them signed its current readout.json; where it
names none, signatures are not required (and `verify` still reports them).

Keys are Ed25519 (`cryptography`, the `sign` extra): public keys as PEM (SubjectPublicKeyInfo) or
OpenSSH (``ssh-ed25519 ...``) files, private keys as PEM (PKCS#8, optionally encrypted with the password
in ``READOUT_SIGNING_KEY_PASSWORD``) or OpenSSH files.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from readout_sdk.errors import SdkError

SIGNATURE_FILE = "readout.sig"
FORMAT = "readout-signature/1"
TRUSTED_KEYS_ENV = "READOUT_TRUSTED_KEYS"
SIGNING_KEY_ENV = "READOUT_SIGNING_KEY"
PASSWORD_ENV = "READOUT_SIGNING_KEY_PASSWORD"
SIGN_EXTRA = "pip install 'readout-export[sign]'"
KEY_SUFFIXES = (".pub", ".pem")  # what a directory of trusted keys is read for


class SignatureError(SdkError, RuntimeError):
    """A signature, a key or the signature policy refuses an artifact or a command."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SignatureError(f"signatures need the sign extra (cryptography): {SIGN_EXTRA}") from None
    return serialization, ed25519


@dataclass(frozen=True)
class PublicKey:
    """One Ed25519 public key and where it came from."""

    raw: bytes
    source: str

    @property
    def key_id(self) -> str:
        """``ed25519:`` + the first 16 hex digits of the sha256 of the raw key: how every message names it."""
        return key_id(self.raw)

    def verifies(self, signature: bytes, message: bytes) -> bool:
        _, ed25519 = _crypto()
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def key_id(raw: bytes) -> str:
    return "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]


def read_public_key(path: str | Path) -> PublicKey:
    """An Ed25519 public key from a PEM or OpenSSH file (a refusal names the file and what it holds)."""
    serialization, ed25519 = _crypto()
    path, data = _key_file(path, "the key")
    try:
        key = (serialization.load_ssh_public_key(data) if data.lstrip().startswith(b"ssh-")
               else serialization.load_pem_public_key(data))
    except (ValueError, TypeError) as e:
        raise SignatureError(f"{path}: not a PEM or OpenSSH public key ({_first(e)})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SignatureError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 public key; "
                             "make one with `readout-export keygen`")
    return PublicKey(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw), str(path))


def trusted_keys(paths: Iterable[str | Path] | None = None) -> tuple[PublicKey, ...]:
    """The keys the policy trusts: ``paths`` (files, or directories whose ``*.pub`` / ``*.pem`` files are
    keys), or, when ``paths`` is None, those ``READOUT_TRUSTED_KEYS`` names. A named path that does not
    exist, a directory with no key, or a file that is no Ed25519 public key is refused: a policy that
    silently trusted nothing would let everything through or nothing."""
    if paths is None:
        env = os.environ.get(TRUSTED_KEYS_ENV, "")
        paths = [p for p in env.split(os.pathsep) if p.strip()]
    keys: list[PublicKey] = []
    for p in paths:
        path = Path(p).expanduser()
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if f.suffix in KEY_SUFFIXES and f.is_file())
            if not found:
                raise SignatureError(f"{path}: a trusted-keys directory with no {' or '.join(KEY_SUFFIXES)} file")
            keys += [read_public_key(f) for f in found]
        elif path.exists():
            keys.append(read_public_key(path))
        else:
            raise SignatureError(f"{path}: trusted key not found")
    return tuple(keys)


def payload(meta_sha256: str, release_id: str | None, signed_at: str) -> bytes:
    """The bytes a signature signs: canonical JSON naming the format, readout.json's sha256 and release."""
    return json.dumps({"format": FORMAT, "readout.json": {"sha256": meta_sha256}, "release_id": release_id,
                       "signed_at": signed_at}, sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Signature:
    """One entry of readout.sig, as read (nothing in it is trusted until :func:`check` verifies it)."""

    key_id: str
    public_key: bytes
    meta_sha256: str
    release_id: str | None
    signed_at: str
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "algorithm": "ed25519",
                "public_key": base64.b64encode(self.public_key).decode(),
                "signed": {"readout.json": {"sha256": self.meta_sha256}, "release_id": self.release_id,
                           "signed_at": self.signed_at},
                "signature": base64.b64encode(self.signature).decode()}

    @property
    def message(self) -> bytes:
        return payload(self.meta_sha256, self.release_id, self.signed_at)


def read_signatures(root: Path) -> tuple[list[Signature], str]:
    """The signatures in ``root/readout.sig`` and, when the file is absent or unreadable, why there are none
    (a malformed file is no signature at all: it is reported, never half-trusted)."""
    path = root / SIGNATURE_FILE
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return [], f"no {SIGNATURE_FILE}"
    except (OSError, ValueError, RecursionError) as e:
        return [], f"{SIGNATURE_FILE} cannot be read ({_first(e)})"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("signatures"), list):
        return [], f"{SIGNATURE_FILE} is not a {FORMAT} document"
    out = []
    for i, entry in enumerate(doc["signatures"]):
        try:
            signed = entry["signed"]
            out.append(Signature(str(entry["key_id"]), base64.b64decode(entry["public_key"], validate=True),
                                 str(signed["readout.json"]["sha256"]), signed.get("release_id"),
                                 str(signed["signed_at"]), base64.b64decode(entry["signature"], validate=True)))
        except (KeyError, TypeError, ValueError) as e:
            return [], f"{SIGNATURE_FILE} $.signatures[{i}] is malformed ({_first(e)})"
    return out, ""


@dataclass(frozen=True)
class Verdict:
    """What the signatures on one readout.json say: ``valid`` signatures by key id (verified, over these
    exact bytes), and one line per signature that did not count, with why."""

    valid: tuple[str, ...]
    problems: tuple[str, ...]
    absent: str = ""
    valid_keys: tuple[bytes, ...] = ()  # the raw public keys of the valid signatures (the policy compares these)

    def line(self) -> str:
        """One line for `verify` and `inspect`."""
        if self.absent:
            return f"unsigned ({self.absent})"
        parts = [f"signed by {k}" for k in self.valid] + list(self.problems)
        return "; ".join(parts)


def examine(root: Path, meta_bytes: bytes) -> Verdict:
    """Check every signature in readout.sig against ``meta_bytes`` (readout.json's bytes, as read once):
    a signature counts only when its key signed this payload and the payload names these bytes' sha256."""
    sigs, absent = read_signatures(root)
    if absent:
        return Verdict((), (), absent)  # nothing to verify: no library needed
    _crypto()
    sha = hashlib.sha256(meta_bytes).hexdigest()
    valid, problems, raws = [], [], []
    for s in sigs:
        key = PublicKey(s.public_key, SIGNATURE_FILE)
        if key.key_id != s.key_id or len(s.public_key) != 32:
            problems.append(f"a signature names key {s.key_id} but carries another key: ignored")
        elif not key.verifies(s.signature, s.message):
            problems.append(f"the signature by {s.key_id} does not verify (forged or damaged)")
        elif s.meta_sha256 != sha:
            problems.append(f"the signature by {s.key_id} ({s.signed_at}) is over another readout.json: the "
                            "artifact changed after it was signed; sign it again")
        else:
            valid.append(s.key_id)
            raws.append(s.public_key)
    return Verdict(tuple(valid), tuple(problems), "", tuple(raws))


def enforce(root: Path, meta_bytes: bytes, keys: Sequence[PublicKey]) -> str:
    """Under a policy (``keys`` non-empty): the trusted key id that signed these readout.json bytes, or a
    :class:`SignatureError` saying in one line why the artifact is refused."""
    verdict = examine(root, meta_bytes)
    trusted = {k.key_id for k in keys}
    for k, raw in zip(verdict.valid, verdict.valid_keys):
        if any(raw == t.raw for t in keys):  # the whole key, not its short id: an id is for people to read
            return k
    where = root / SIGNATURE_FILE
    wanted = ", ".join(sorted(trusted))
    if verdict.absent:
        raise SignatureError(f"{root}: unsigned ({verdict.absent}), and the signature policy requires a signature "
                             f"by a trusted key ({wanted}); sign it with `readout-export sign`")
    if verdict.valid:
        raise SignatureError(f"{where}: signed by {', '.join(verdict.valid)}, not by a trusted key ({wanted})")
    raise SignatureError(f"{where}: {verdict.problems[0] if verdict.problems else 'holds no signature'}")


def read_private_key(path: str | Path) -> Any:
    """An Ed25519 private key from a PEM (PKCS#8) or OpenSSH file; a password, where the file is encrypted,
    comes from ``READOUT_SIGNING_KEY_PASSWORD`` (never from the command line, where others could read it)."""
    serialization, ed25519 = _crypto()
    path, data = _key_file(path, "the signing key")
    password = os.environ.get(PASSWORD_ENV)
    secret = password.encode() if password else None
    try:
        key = (serialization.load_ssh_private_key(data, secret) if b"OPENSSH PRIVATE KEY" in data
               else serialization.load_pem_private_key(data, secret))
    except TypeError as e:  # encrypted without a password, or a password for an unencrypted key
        raise SignatureError(f"{path}: {_first(e)} (the password comes from {PASSWORD_ENV})") from None
    except ValueError as e:
        raise SignatureError(f"{path}: not a PEM or OpenSSH private key, or a wrong password ({_first(e)})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SignatureError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 private key; "
                             "make one with `readout-export keygen`")
    return key


def sign_bytes(root: Path, meta_bytes: bytes, release_id: str | None, private_key: Any) -> tuple[Signature, list[str]]:
    """Add (or renew) this key's signature over ``meta_bytes`` to ``root/readout.sig``, written atomically;
    signatures by other keys that still verify over these bytes are kept. Returns the new signature and
    one line per signature dropped (stale or broken)."""
    from cryptography.hazmat.primitives import serialization

    from readout_sdk.atomic import write_atomic

    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    sha = hashlib.sha256(meta_bytes).hexdigest()
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    new = Signature(key_id(raw), raw, sha, release_id, at, private_key.sign(payload(sha, release_id, at)))
    kept, dropped = [], []
    verdict = examine(root, meta_bytes)
    for s in read_signatures(root)[0]:
        if s.key_id == new.key_id:
            continue
        if s.key_id in verdict.valid:
            kept.append(s)
        else:
            dropped.append(f"dropped the signature by {s.key_id}: it no longer verifies over this readout.json")
    doc = {"format": FORMAT, "signatures": [s.to_json() for s in [*kept, new]]}
    write_atomic(root / SIGNATURE_FILE, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
    return new, dropped


def generate(path: str | Path) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair: ``path`` (private, PKCS#8 PEM, mode 0600, encrypted when
    ``READOUT_SIGNING_KEY_PASSWORD`` is set) and ``path.pub`` (public, PEM). Existing files are never
    replaced: losing a signing key is not undoable. Returns both paths and the key id."""
    serialization, ed25519 = _crypto()
    private = Path(path)
    public = private.with_name(private.name + ".pub")
    for p in (private, public):
        if p.exists() or p.is_symlink():
            raise SignatureError(f"{p} exists; a key is never overwritten (choose another path)")
    if not private.parent.is_dir():
        raise SignatureError(f"{private.parent}: no such directory")
    key = ed25519.Ed25519PrivateKey.generate()
    password = os.environ.get(PASSWORD_ENV)
    crypt = (serialization.BestAvailableEncryption(password.encode()) if password
             else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt)
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never world-readable, not even briefly
    except OSError as e:
        raise SignatureError(f"{private}: cannot create the key ({e.strerror or e})") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    try:
        fd = os.open(public, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        private.unlink()  # nothing half-written: no private key without its public half
        raise SignatureError(f"{public}: cannot create the public key ({e.strerror or e})") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pub)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return private, public, key_id(raw)


def _key_file(path: str | Path, what: str) -> tuple[Path, bytes]:
    """A key file's path and bytes, or a refusal naming the file."""
    path = Path(path)
    try:
        return path, path.read_bytes()
    except OSError as e:
        raise SignatureError(f"{path}: cannot read {what} ({e.strerror or e})") from None


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
