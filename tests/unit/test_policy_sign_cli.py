"""`stormwatch policy sign`: the signed document for a pipeline that publishes with its own producer,
under the configured key; without a key, a clear error and nothing printed."""

import json

from stormwatch.cli import main
from stormwatch.config import PROJECT_ROOT
from stormwatch.policy import load as load_policy
from stormwatch.policy_signing import SigningKey, signature_error

POLICY = PROJECT_ROOT / "config" / "policy.toml"


def _config(tmp_path, key_file: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(f"base = {str(PROJECT_ROOT / 'config' / 'stormwatch.toml')!r}\n"
                    f"[pipeline.policy]\nsigning_key_file = {key_file!r}\nsigning_key_env = \"\"\n")
    return str(path)


def test_sign_prints_the_policy_signed_with_the_configured_key(tmp_path, capsys):
    (tmp_path / "key").write_text("s" * 64 + "\n")
    assert main(["--config", _config(tmp_path, str(tmp_path / "key")), "policy", "sign", str(POLICY)]) == 0
    out, err = capsys.readouterr()
    signed = json.loads(out)
    assert signature_error(signed, SigningKey(b"s" * 64, "test")) is None
    assert {k: v for k, v in signed.items() if k != "signature"} == load_policy(POLICY).raw
    assert "s" * 64 not in out.replace(signed["signature"], "") + err


def test_sign_without_a_key_is_an_error(tmp_path, capsys):
    assert main(["--config", _config(tmp_path, ""), "policy", "sign", str(POLICY)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no signing key configured" in err
