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
    assert cfg.listen == "127.0.0.1:9095" and cfg.storage.backend == "sqlite" and cfg.storage.synchronous == "FULL"


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
    assert cfg.storage.retention == 12 * 3600


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


def test_the_sections_other_parts_read_are_parsed_once_into_typed_settings(tmp_path):
    path = tmp_path / "alertd.yml"
    path.write_text(textwrap.dedent("""
        tls: {cert_file: certs/alertd.pem, key_file: /etc/alertd/key.pem, min_version: TLS1.3}
        report: {sample_interval: 30m, cluster: prod-a, digest: {channel: "#capacity", weekday: friday, hour: 7}}
        enrich: {kube: {enabled: true, cluster: prod-a}}
        normalize: {kubernetes: {wait: 500ms, max_lookups: 8}}
        """))
    cfg = load_config(path)
    assert cfg.tls is not None and (cfg.tls.cert_file, str(cfg.tls.key_file), cfg.tls.min_version) == (
        tmp_path.resolve() / "certs" / "alertd.pem", "/etc/alertd/key.pem", "TLS1.3")  # relative to the file
    assert (cfg.report.sample_interval.total_seconds(), cfg.report.cluster, cfg.report.sample_fleet) == (1800, "prod-a", True)
    assert (cfg.report.digest.channel, cfg.report.digest.weekday, cfg.report.digest.hour) == ("#capacity", 4, 7)
    assert cfg.enrich.kube is not None and cfg.enrich.kube.cluster == "prod-a" and cfg.enrich.logs is None
    assert (cfg.kubernetes.wait, cfg.kubernetes.max_lookups) == (0.5, 8)


def test_absent_or_disabled_sections_read_as_off():
    cfg = parse_config({"enrich": {"kube": {"enabled": False}}, "report": {"sample_fleet": False}}, "<test>")
    assert cfg.tls is None and cfg.enrich.kube is None and not cfg.report.sample_fleet
    assert parse_config({}, "<test>").report.sample_interval.total_seconds() == 3600


def test_a_bad_tls_section_is_named_with_its_line(tmp_path):
    path = tmp_path / "alertd.yml"
    path.write_text("listen: 127.0.0.1:9095\ntls: {cert_file: a.pem}\n")
    with pytest.raises(InvalidDocument) as err:
        load_config(path)
    assert "tls" in str(err.value) and "key_file" in str(err.value) and ":2" in str(err.value)
