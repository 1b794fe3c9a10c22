"""Who may change the policy: HMAC-SHA256 signatures over the canonical policy document, the key that
signs and verifies them (from the configuration or the environment, never logged), and the order of
policy versions that makes an older one a replay.

The canonical form of a policy document is its JSON with the `signature` field left out, keys sorted,
no whitespace, non-ASCII escaped: Python's
`json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)`, UTF-8 encoded. The
signature is `hmac-sha256:` and the lower-case hex HMAC-SHA256 of those bytes under the key, in the
document's top-level `signature` field. `stormwatch policy sign` / `publish` write it.

No Flink here: the decision jobs' PolicyGate (jobs/decision_stream.py) calls `apply_signed_update`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stormwatch.policy import Policy, apply_update

SIGNATURE_FIELD = "signature"
SCHEME = "hmac-sha256:"
# Keys shorter than this are refused: HMAC-SHA256's key should carry at least its output's 256 bits.
MIN_KEY_BYTES = 32


class SigningKeyError(ValueError):
    """A key named by the configuration that cannot be used: a missing file, an empty or short key."""


@dataclass(frozen=True)
class SigningKey:
    """The secret and where it came from (`source`, safe to log: an environment variable's or a file's
    name). The secret is in no repr, str or message."""

    secret: bytes = field(repr=False)
    source: str

    def __post_init__(self):
        if len(self.secret) < MIN_KEY_BYTES:
            raise SigningKeyError(f"the policy signing key from {self.source} is {len(self.secret)} bytes; "
                                  f"at least {MIN_KEY_BYTES} are needed (e.g. `openssl rand -hex 32`)")


def canonical(doc: dict[str, Any]) -> bytes:
    """The bytes a signature covers: the document without its signature, in canonical JSON."""
    unsigned = {k: v for k, v in doc.items() if k != SIGNATURE_FIELD}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("utf-8")


def signature(doc: dict[str, Any], key: SigningKey) -> str:
    return SCHEME + hmac.new(key.secret, canonical(doc), hashlib.sha256).hexdigest()


def sign(doc: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    """The document with its signature (any signature it had replaced)."""
    return {**{k: v for k, v in doc.items() if k != SIGNATURE_FIELD}, SIGNATURE_FIELD: signature(doc, key)}


def signature_error(doc: Any, key: SigningKey) -> str | None:
    """None when `doc` carries a valid signature under `key`; otherwise why not."""
    if not isinstance(doc, dict):
        return None  # not a policy at all: validation names that
    given = doc.get(SIGNATURE_FIELD)
    if given is None:
        return (f"unsigned: the document has no `{SIGNATURE_FIELD}` field, and this job accepts only policies "
                f"signed with its key (`stormwatch policy publish` or `stormwatch policy sign` sign them)")
    if not isinstance(given, str) or not given.startswith(SCHEME):
        return f"{SIGNATURE_FIELD}: expected a string `{SCHEME}<hex>`, got {str(given)[:80]!r}"
    if not hmac.compare_digest(given.encode(), signature(doc, key).encode()):
        return (f"{SIGNATURE_FIELD}: does not match the document under this job's key (signed with another "
                f"key, or changed after it was signed)")
    return None


_PART = re.compile(r"[0-9]+|[A-Za-z]+")


def version_key(version: str) -> tuple:
    """The order of policy versions: the runs of digits and of letters, left to right (anything else,
    "-", ".", "_", "+", only separates them); digits compare as numbers, letters as text (case-blind),
    a number before text, and a version that is a prefix of another is older. So
    2026-12-07 < 2026-12-07.1 < 2026-12-07.2 < 2026-12-07.10 < 2026-12-08.1, and v9 < v10."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in _PART.findall(version))


def replay_error(current: Policy, new: Policy) -> str | None:
    """None when `new` may follow `current`: a newer version, or the same version with the same document
    (one published twice, or read again). Otherwise why it is taken for a replay."""
    old_key, new_key = version_key(current.version), version_key(new.version)
    if new_key < old_key:
        return (f"replay: version {new.version!r} is older than {current.version!r} in force; "
                f"a change needs a newer version")
    if new_key == old_key and canonical(new.raw) != canonical(current.raw):
        return (f"replay: version {new.version!r} is that of the policy in force ({current.version!r}) with "
                f"another document; a change needs a newer version")
    return None


def apply_signed_update(current: Policy, raw_json: str, key: SigningKey | None) -> tuple[Policy, str | None]:
    """As `policy.apply_update`, and with a key: (current, why) for an unsigned or wrongly signed
    document, or a replay of an older version (`replay_error`). Without a key, today's rules: any
    valid document is accepted, signed or not, whatever its version."""
    if key is None:
        return apply_update(current, raw_json)
    try:
        doc = json.loads(raw_json)
    except (json.JSONDecodeError, TypeError):
        return apply_update(current, raw_json)  # names the JSON error
    if (error := signature_error(doc, key)) is not None:
        return current, error
    new, error = apply_update(current, raw_json)
    if error is not None:
        return current, error
    if (error := replay_error(current, new)) is not None:
        return current, error
    return new, None


def signing_key(config, environ: dict[str, str] | None = None) -> SigningKey | None:
    """The key of [pipeline.policy]: the file `signing_key_file` names if set, else the environment
    variable `signing_key_env` if it is set; None if neither. SigningKeyError for a file that cannot be
    read, an empty or short key, or none at all while `require_signed` is true."""
    environ = os.environ if environ is None else environ
    section = config.section("pipeline", "policy")
    path, env = section.get("signing_key_file", ""), section.get("signing_key_env", "")
    key = None
    if path:
        file = config.resolve(path)
        try:
            secret = Path(file).read_bytes().strip()
        except OSError as e:
            raise SigningKeyError(f"[pipeline.policy] signing_key_file {file}: {e.strerror}") from None
        key = SigningKey(secret, f"file {file}")
    elif env and env in environ:
        key = SigningKey(environ[env].strip().encode("utf-8"), f"environment variable {env}")
    if key is None and section.get("require_signed", False):
        raise SigningKeyError(f"[pipeline.policy] require_signed is true but no signing key is configured: set "
                              f"{env or 'signing_key_env'} or signing_key_file")
    return key


UNAUTHENTICATED = ("the policy topic is unauthenticated: no signing key configured ([pipeline.policy] "
                   "signing_key_env / signing_key_file), so any valid policy record is applied; anyone who "
                   "can write to the topic steers the decisions (README: Securing the policy topic)")
