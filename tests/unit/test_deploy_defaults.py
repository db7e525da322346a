"""The shipped deployments are safe by default: they listen on every interface, so their API and
receiver need credentials, read from secret files (not environment variables)."""
from __future__ import annotations

from pathlib import Path

import yaml

from alertd.config.settings import Config, parse_config
from alertd.web.auth import Authenticator, exposure_problem, is_loopback

ROOT = Path(__file__).resolve().parents[2]
K8S_SECRETS = "/etc/alertd/secrets/"
DOCKER_SECRETS = "/run/secrets/"


def _with_secrets(text: str, prefix: str, tmp_path: Path) -> dict:
    """The config with its secret files placed under tmp_path (each holds a made-up 32-character token)."""
    doc = yaml.safe_load(text.replace(prefix, f"{tmp_path}/"))
    for line in text.splitlines():
        if prefix in line:
            name = line.split(prefix, 1)[1].split()[0].rstrip("}, ")
            (tmp_path / name).write_text("s" * 32 + "\n")
    return doc


def deployment_config(tmp_path: Path) -> Config:
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/alertd.yaml").read_text()))
    text = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["alertd.yml"]
    assert "${" not in text, "secrets come from files, not the environment"
    return parse_config(_with_secrets(text, K8S_SECRETS, tmp_path), "alertd.yaml")


def test_kubernetes_deployment_locks_the_api_and_the_receiver(tmp_path):
    cfg = deployment_config(tmp_path)
    host = cfg.host_port[0]
    assert not is_loopback(host)
    assert cfg.api_auth.enabled and cfg.receiver_auth.enabled
    assert exposure_problem(host, Authenticator.from_config(cfg)) == ""
    deployment = next(d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/alertd.yaml").read_text())
                      if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert not container.get("env"), "no secret in the pod spec's environment"


def test_docker_image_default_config_locks_the_api(tmp_path):
    text = (ROOT / "deploy/docker/alertd.yml").read_text()
    cfg = parse_config(_with_secrets(text, DOCKER_SECRETS, tmp_path), "alertd.yml")
    assert not is_loopback(cfg.host_port[0]) and cfg.api_auth.enabled and cfg.receiver_auth.enabled
    assert "deploy/docker/alertd.yml /etc/alertd/alertd.yml" in (ROOT / "Dockerfile").read_text()


def test_docker_default_without_its_secret_files_names_the_missing_file():
    import pytest

    from alertd.core.errors import InvalidDocument

    with pytest.raises(InvalidDocument) as exc:
        parse_config(yaml.safe_load((ROOT / "deploy/docker/alertd.yml").read_text()), "alertd.yml")
    assert "/run/secrets/alertd_api_token" in str(exc.value)


def test_examples_listen_on_loopback_only():
    cfg = parse_config(yaml.safe_load((ROOT / "examples/alertd.yml").read_text()), "alertd.yml")
    assert is_loopback(cfg.host_port[0])


def test_kubernetes_runs_three_replicas_on_postgres_with_a_disruption_budget(tmp_path):
    cfg = deployment_config(tmp_path)
    assert cfg.storage.backend == "postgres" and cfg.storage.postgres_dsn
    assert len(cfg.raw["alertmanager"]["urls"]) == 2
    docs = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/alertd.yaml").read_text())}
    assert docs["Deployment"]["spec"]["replicas"] == 3
    assert "PersistentVolumeClaim" not in docs  # replicas are stateless: the state is in PostgreSQL
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 2
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
