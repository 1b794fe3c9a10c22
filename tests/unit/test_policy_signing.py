"""Who may change the policy (stormwatch/policy_signing.py): HMAC-SHA256 over the canonical document,
the key from the configuration or the environment, and the version order that makes an older one a
replay."""

import hashlib
import hmac
import json
import tomllib

import pytest

from stormwatch.config import PROJECT_ROOT, load
from stormwatch.policy import load as load_policy
from stormwatch.policy_signing import (
    SigningKey,
    SigningKeyError,
    apply_signed_update,
    canonical,
    replay_error,
    sign,
    signature_error,
    signing_key,
    version_key,
)

PATH = PROJECT_ROOT / "config" / "policy.toml"
DOC = tomllib.loads(PATH.read_text())
KEY = SigningKey(b"k" * 32, "test")
OTHER = SigningKey(b"o" * 32, "test")


def test_the_canonical_form_is_sorted_compact_json_without_the_signature():
    doc = {"b": [1, {"z": 1, "a": "é"}], "a": 0.5, "signature": "anything"}
    assert canonical(doc) == b'{"a":0.5,"b":[1,{"a":"\\u00e9","z":1}]}'
    # Key order and whitespace of the document as sent do not matter.
    assert canonical(json.loads(json.dumps(doc, indent=2))) == canonical(dict(reversed(list(doc.items()))))


def test_a_signature_is_the_hmac_sha256_of_the_canonical_form():
    signed = sign(DOC, KEY)
    expected = hmac.new(b"k" * 32, canonical(DOC), hashlib.sha256).hexdigest()
    assert signed["signature"] == "hmac-sha256:" + expected
    assert signature_error(signed, KEY) is None
    # Re-signing replaces the signature; it never covers itself.
    assert sign(signed, KEY) == signed


@pytest.mark.parametrize("doc, message", [
    (DOC, "unsigned"),
    (sign(DOC, OTHER), "does not match"),
    ({**sign(DOC, KEY), "version": "2099-01-01.1"}, "does not match"),
    ({**DOC, "signature": "md5:abc"}, "expected a string `hmac-sha256:"),
    ({**DOC, "signature": 7}, "expected a string"),
])
def test_unsigned_wrongly_signed_and_tampered_documents_are_refused(doc, message):
    assert message in signature_error(doc, KEY)


def test_the_key_is_in_no_repr():
    assert "k" * 32 not in repr(KEY) and "test" in repr(KEY)


def test_a_short_key_is_refused():
    with pytest.raises(SigningKeyError, match="at least 32"):
        SigningKey(b"short", "environment variable X")


@pytest.mark.parametrize("older, newer", [
    ("2026-12-07.1", "2026-12-07.2"),
    ("2026-12-07.2", "2026-12-07.10"),
    ("2026-12-07", "2026-12-07.1"),
    ("2026-12-07.9", "2026-12-08.1"),
    ("2026-12-31.1", "2027-01-01.1"),
    ("v9", "v10"),
    ("1.0", "1.0.rc"),
])
def test_versions_are_ordered_by_their_numbers_and_words(older, newer):
    assert version_key(older) < version_key(newer)


def test_versions_differing_only_in_separators_or_case_are_equal():
    assert version_key("2026-12-07.1") == version_key("2026.12.07-1")
    assert version_key("V2") == version_key("v2")


def _doc(version: str, **change) -> dict:
    return {**DOC, "version": version, **change}


def _apply(current_doc: dict, new_doc: dict | str, key=KEY):
    current, error = apply_signed_update(load_policy(PATH), json.dumps(sign(current_doc, KEY)), KEY)
    assert error is None
    raw = new_doc if isinstance(new_doc, str) else json.dumps(new_doc)
    return current, apply_signed_update(current, raw, key)


def test_a_newer_signed_version_is_accepted():
    current, (new, error) = _apply(_doc("2026-12-07.2"), sign(_doc("2026-12-07.3"), KEY))
    assert error is None and new.version == "2026-12-07.3"


@pytest.mark.parametrize("new_doc, message", [
    (_doc("2026-12-08.1"), "unsigned"),
    (sign(_doc("2026-12-08.1"), OTHER), "does not match"),
    (sign(_doc("2026-12-07.1"), KEY), "replay: version '2026-12-07.1' is older than '2026-12-07.2'"),
    (sign(_doc("2026-12-07.2", breaker={**DOC["breaker"], "overrides": {"service:a": "FORCED_OPEN"}}), KEY),
     "replay: version '2026-12-07.2' is that of the policy in force"),
    ("{not json", "not JSON"),
    (sign(_doc("2026-12-08.1", health={**DOC["health"], "min_calls": -1}), KEY), "health.min_calls"),
])
def test_with_a_key_unsigned_wrongly_signed_replayed_and_invalid_ones_are_rejected(new_doc, message):
    current, (kept, error) = _apply(_doc("2026-12-07.2"), new_doc)
    assert kept is current and message in error


def test_the_policy_in_force_published_again_is_no_replay():
    current, (same, error) = _apply(_doc("2026-12-07.2"), sign(_doc("2026-12-07.2"), KEY))
    assert error is None and same.raw["version"] == "2026-12-07.2"


def test_the_default_policy_is_in_force_first_so_an_older_one_is_a_replay():
    default = load_policy(PATH)
    kept, error = apply_signed_update(default, json.dumps(sign(_doc("2026-01-01.1"), KEY)), KEY)
    assert kept is default and error.startswith("replay:")
    assert replay_error(default, default) is None


def test_without_a_key_todays_rules_hold():
    default = load_policy(PATH)
    new, error = apply_signed_update(default, json.dumps(_doc("2000-01-01.1")), None)
    assert error is None and new.version == "2000-01-01.1"


def _config(tmp_path, **policy) -> object:
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in policy.items())
    path = tmp_path / "c.toml"
    path.write_text(f'base = {json.dumps(str(PROJECT_ROOT / "config" / "stormwatch.toml"))}\n'
                    f"[pipeline.policy]\n{lines}\n")
    return load(path)


def test_the_key_comes_from_the_environment_variable_the_configuration_names(tmp_path):
    config = _config(tmp_path, signing_key_env="MY_POLICY_KEY")
    key = signing_key(config, {"MY_POLICY_KEY": "s" * 40 + "\n"})
    assert key.secret == b"s" * 40 and key.source == "environment variable MY_POLICY_KEY"
    assert signing_key(config, {}) is None
    assert signing_key(config, {"STORMWATCH_POLICY_KEY": "s" * 40}) is None


def test_a_key_file_wins_over_the_environment(tmp_path):
    (tmp_path / "key").write_text("f" * 32 + "\n")
    key = signing_key(_config(tmp_path, signing_key_file=str(tmp_path / "key")), {"STORMWATCH_POLICY_KEY": "e" * 32})
    assert key.secret == b"f" * 32 and str(tmp_path / "key") in key.source


@pytest.mark.parametrize("policy, environ, message", [
    ({"signing_key_file": "/nonexistent/key"}, {}, "signing_key_file /nonexistent/key"),
    ({}, {"STORMWATCH_POLICY_KEY": ""}, "0 bytes"),
    ({"require_signed": True}, {}, "require_signed is true but no signing key"),
])
def test_an_unusable_or_missing_required_key_is_a_clear_error(tmp_path, policy, environ, message):
    with pytest.raises(SigningKeyError, match=message):
        signing_key(_config(tmp_path, **policy), environ)


def test_no_error_names_the_key(tmp_path):
    with pytest.raises(SigningKeyError) as e:
        signing_key(_config(tmp_path), {"STORMWATCH_POLICY_KEY": "secret-but-short"})
    assert "secret-but-short" not in str(e.value)
