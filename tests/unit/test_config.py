import textwrap

import pytest

from alertd.config.settings import load_config, parse_config
from alertd.core.errors import InvalidDocument
from alertd.rules.ruleset import load_rules


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_defaults_without_a_file():
    cfg = load_config(None)
    assert cfg.listen == "127.0.0.1:9095" and cfg.storage_backend == "sqlite" and cfg.synchronous == "FULL"


def test_env_interpolation_for_secrets(tmp_path):
    p = write(tmp_path, "a.yml", """
        receiver:
          auth:
            bearer_token: ${HOOK_TOKEN}
        storage:
          retention: ${RETENTION:-12h}
    """)
    cfg = load_config(p, env={"HOOK_TOKEN": "s3cret"})
    assert cfg.receiver_auth.check_token("s3cret") is not None
    assert cfg.retention.total_seconds() == 12 * 3600


def test_missing_env_var_is_named_with_its_line(tmp_path):
    p = write(tmp_path, "a.yml", """
        listen: 127.0.0.1:9095
        receiver:
          auth:
            bearer_token: ${NOPE}
    """)
    with pytest.raises(InvalidDocument) as exc:
        load_config(p, env={})
    assert f"{p}:5:" in str(exc.value) and "NOPE" in str(exc.value)


def test_schema_errors_name_the_key_and_line(tmp_path):
    p = write(tmp_path, "a.yml", """
        listen: 127.0.0.1:9095
        storage:
          backend: mysql
        log:
          format: xml
        bogus: 1
    """)
    with pytest.raises(InvalidDocument) as exc:
        load_config(p)
    text = str(exc.value)
    assert "storage.backend: 'mysql' is not one of" in text and f"{p}:4:" in text
    assert "log.format" in text
    assert "unknown key(s) 'bogus'" in text


def test_max_backlog_defaults_to_100000_and_0_turns_it_off():
    assert load_config(None).max_backlog == 100_000
    assert parse_config({"receiver": {"max_backlog": 0}}, "x.yml").max_backlog == 0
    assert parse_config({"receiver": {"max_backlog": 5}}, "x.yml").max_backlog == 5
    with pytest.raises(InvalidDocument, match="receiver.max_backlog"):
        parse_config({"receiver": {"max_backlog": -1}}, "x.yml")


def test_postgres_needs_a_dsn():
    with pytest.raises(InvalidDocument, match="postgres_dsn"):
        parse_config({"storage": {"backend": "postgres"}}, "x.yml")


def test_rule_errors_have_file_line_column(tmp_path):
    write(tmp_path, "corr.yml", """
        correlation:
          hold_down: 5 minutes
          groups:
            - name: node
              match: ['signal=="xid"']
              by: [cluster, node]
            - name: node
              by: [alertname]
              allow_empty: true
    """)
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path])
    text = str(exc.value)
    assert f"{tmp_path / 'corr.yml'}:3:14: correlation.hold_down:" in text, text


def test_rule_semantic_errors(tmp_path):
    write(tmp_path, "corr.yml", """
        correlation:
          groups:
            - name: node
              match: ['signal=~"("']
              by: [cluster, node]
            - name: node
              by: [alertname]
              allow_empty: true
    """)
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path])
    messages = [(p.line, p.message) for p in exc.value.problems]
    assert any(line == 5 and "bad regex" in m for line, m in messages), messages
    assert any(line == 7 and "duplicate group name" in m for line, m in messages), messages


def test_yaml_syntax_error_is_located(tmp_path):
    write(tmp_path, "broken.yml", "correlation:\n  hold_down: [5m\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path])
    assert exc.value.problems[0].line >= 2 and "YAML syntax" in exc.value.problems[0].message


def test_relative_rule_paths_are_relative_to_the_config_file(tmp_path):
    (tmp_path / "conf").mkdir()
    p = write(tmp_path / "conf", "a.yml", """
        rules:
          paths: [rules, /abs/rules]
    """)
    assert load_config(p).rule_paths == [str(tmp_path / "conf" / "rules"), "/abs/rules"]


def test_notify_retry_bounds_the_backoff():
    from alertd.notify.outbox import backoff

    cfg = parse_config({"notify": {"retry": {"max_backoff": "3s", "max_attempts": 40}}}, "t")
    assert cfg.retry_max_backoff.total_seconds() == 3 and cfg.retry_max_attempts == 40
    assert parse_config({}, "t").retry_max_backoff.total_seconds() == 300
    assert max(backoff(20, cap=3.0) for _ in range(200)) <= 3.0
    with pytest.raises(InvalidDocument, match="max_attempts"):
        parse_config({"notify": {"retry": {"max_attempts": 0}}}, "t")
