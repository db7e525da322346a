"""Secrets from files: every *_file key, mappings of files, and errors that name the file, never the value."""
from __future__ import annotations

import pytest

from alertd.config.secrets import configured_secrets
from alertd.config.settings import load_config, parse_config
from alertd.core.errors import InvalidDocument
from alertd.integrations.slack.integration import SlackSettings


def test_every_secret_can_come_from_a_file(tmp_path):
    for name, value in {"slack": "xoxb-1", "signing": "sig-2", "pd": "K" * 32, "pg": "pg-pass", "os": "os-pass",
                        "tok": "t" * 20 + "\n" + "u" * 20}.items():
        (tmp_path / name).write_text(value + "\n")
    cfg = load_config(_write(tmp_path, """
storage: {postgres_password_file: pg}
api: {auth: {tokens: [{name: ops, role: act, token_file: tok}]}}
notify:
  slack: {token_file: slack, signing_secret_file: signing}
  pagerduty:
    routing_keys: {a: "${A}"}
    routing_keys_files: {b: pd}
enrich:
  logs: {backend: opensearch, url: "http://127.0.0.1:9200", auth: {basic: {username: r, password_file: os}}}
"""), env={"A": "A" * 32})  # relative paths: next to the config file
    slack = SlackSettings.from_config(cfg)
    assert (slack.token, slack.signing_secret) == ("xoxb-1", "sig-2")
    assert cfg.raw["notify"]["pagerduty"]["routing_keys"] == {"a": "A" * 32, "b": "K" * 32}
    assert cfg.storage.postgres_password == "pg-pass"
    assert cfg.raw["enrich"]["logs"]["auth"]["basic"]["password"] == "os-pass"
    assert cfg.api_auth.check_token("t" * 20).name == "ops" and cfg.api_auth.check_token("u" * 20).name == "ops"


def test_webhook_and_opsgenie_keys_come_from_files_and_are_redacted(tmp_path):
    """A webhook endpoint's HMAC secret and Opsgenie's API keys are secrets like the others: a file may hold
    them, and the log redaction knows their values."""
    (tmp_path / "hook").write_text("h" * 24 + "\n")
    (tmp_path / "og").write_text("o" * 32 + "\n")
    cfg = load_config(_write(tmp_path, """
notify:
  webhook: {endpoints: {tickets: {url: "https://tickets.example/hook", secret_file: hook}}}
  opsgenie: {api_keys_files: {gpu-team: og}}
"""))
    assert cfg.raw["notify"]["webhook"]["endpoints"]["tickets"]["secret"] == "h" * 24
    assert cfg.raw["notify"]["opsgenie"]["api_keys"] == {"gpu-team": "o" * 32}
    assert {"h" * 24, "o" * 32} <= configured_secrets(cfg.raw)


def _write(tmp_path, text):
    p = tmp_path / "alertd.yml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("doc,expected", [
    ({"notify": {"slack": {"token_file": "/nonexistent/slack"}}}, "notify.slack.token_file: cannot read secret file /nonexistent/slack"),
    ({"notify": {"slack": {"token": "x", "token_file": "/x"}}}, "give token or token_file, not both"),
    ({"notify": {"slack": {"token_file": ""}}}, "must be a file path"),
])
def test_bad_secret_files_are_named(doc, expected):
    with pytest.raises(InvalidDocument) as exc:
        parse_config(doc, "c.yml")
    assert expected in str(exc.value)


def test_an_invalid_secret_is_reported_without_its_value(tmp_path):
    (tmp_path / "short").write_text("tiny-secret\n")  # api tokens need 16 characters
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InvalidDocument) as exc:
        parse_config({"api": {"auth": {"tokens": [{"name": "a", "token_file": str(tmp_path / "short")},
                                                  {"name": "b", "token_file": str(tmp_path / "empty")}]}}}, "c.yml")
    text = str(exc.value)
    assert "api.auth.tokens[0].token: the value read from its secret file is shorter than the 16 characters it " \
           "needs (it holds 11)" in text
    assert f"secret file {tmp_path / 'empty'} is empty" in text
    assert "tiny-secret" not in text
