"""The image builds from a small context with a pinned base, and its health check follows the listener.

docker is not on the test machines: the Dockerfile is read with dockerfile-parse, and the build context is
what docker-py's own context builder (docker.utils.build.exclude_paths) takes from this tree under the
.dockerignore rules."""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from docker.utils.build import exclude_paths
from dockerfile_parse import DockerfileParser

from alertd.app.healthcheck import health_url, main as healthcheck

ROOT = Path(__file__).resolve().parents[2]


def parsed() -> DockerfileParser:
    parser = DockerfileParser(str(ROOT / "Dockerfile"))
    return parser


def context() -> set[str]:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    return set(exclude_paths(str(ROOT), patterns, dockerfile="Dockerfile"))


def test_the_base_image_is_pinned():
    df = parsed()
    args = {i["value"].split("=", 1)[0]: i["value"].split("=", 1)[1] for i in df.structure if i["instruction"] == "ARG"}
    bases = [i["value"].split()[0] for i in df.structure if i["instruction"] == "FROM"]
    assert bases and all(b in ("${PYTHON_IMAGE}",) for b in bases), bases
    image = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image


def test_the_build_context_holds_what_the_image_copies_and_no_venv():
    files = context()
    assert not any(f.startswith((".venv/", ".git/", "tests/", "data/")) for f in files)
    assert not any("__pycache__" in f for f in files)
    copied = [i["value"].split()[:-1] for i in parsed().structure
              if i["instruction"] == "COPY" and "--from" not in i["value"]]
    for sources in copied:
        for src in sources:
            assert src in files or any(f.startswith(src.rstrip("/") + "/") for f in files), src
    assert "rules/xid-catalog.yml" in files and "alertd/rules/shipped_rules" in files  # the link and its target
    assert sum((ROOT / f).stat().st_size for f in files if (ROOT / f).is_file()) < 10 * 2 ** 20


def test_the_health_check_reads_the_images_config():
    df = parsed()
    check = next(i["value"] for i in df.structure if i["instruction"] == "HEALTHCHECK")
    config = next(i["value"] for i in df.structure if i["instruction"] == "CMD").split("--config")[1]
    assert "alertd.app.healthcheck" in check and config.strip(' "]') in check
    assert "9095" not in check, "no port of its own: the config's listener"


def test_health_url_follows_the_listener():
    assert health_url("0.0.0.0", 9443, True) == "https://127.0.0.1:9443/healthz"
    assert health_url("::", 9095, False) == "http://[::1]:9095/healthz"
    assert health_url("10.0.0.7", 8080, False) == "http://10.0.0.7:8080/healthz"


def test_health_check_fails_on_a_listener_nobody_serves(tmp_path):
    from testkit.process import free_port

    (tmp_path / "alertd.yml").write_text(yaml.safe_dump({"listen": f"127.0.0.1:{free_port()}"}))
    assert healthcheck(["--config", str(tmp_path / "alertd.yml"), "--timeout", "1"]) == 1


def test_the_documented_run_keeps_the_store_on_a_volume_and_sends_the_configs_token():
    """docs/deploy.md's container steps against the image's config: the named volume is at its data_dir
    (which the Dockerfile declares a volume), and the curl reads the file the config's receiver reads."""
    from testkit.container import documented, documented_commands

    config = yaml.safe_load((ROOT / "deploy/docker/alertd.yml").read_text())
    volumes = [i["value"] for i in parsed().structure if i["instruction"] == "VOLUME"]
    assert volumes == [config["data_dir"]]
    options = documented("docker", "run")
    mounted = dict(v.split(":")[:2][::-1] for flag, v in zip(options, options[1:]) if flag == "-v")
    assert mounted[config["data_dir"]] == "alertd-data"
    assert ["docker", "volume", "create", "alertd-data"] in documented_commands()
    secrets_dir = mounted["/run/secrets"].replace("$PWD/", "")
    token_file = config["receiver"]["auth"]["bearer_token_file"].replace("/run/secrets", secrets_dir)
    curl = next(argv for argv in documented_commands() if argv[0] == "curl" and "--data" in argv)
    assert f"Authorization: Bearer $(cat {token_file})" in curl
    assert ["openssl", "rand", "-hex", "32", ">", token_file] in documented_commands()


def test_the_readmes_container_lines_are_the_documented_ones():
    """README's Quick start tells how its curl passes the token to the container: with docs/deploy.md's header,
    volume and listing, word for word."""
    import shlex

    from testkit.container import documented_commands

    readme = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    quoted = re.findall(r"`([^`]+)`", readme.rsplit("```", 1)[1].replace("\n", " "))  # the prose after the block
    header = next(q for q in quoted if q.startswith("-H ") and "Authorization" in q)
    listing = next(q for q in quoted if q.startswith("docker exec"))
    commands = documented_commands()
    curl = next(argv for argv in commands if argv[0] == "curl" and "--data" in argv)
    assert shlex.split(header)[1] in curl[curl.index("-H") + 1:]
    assert shlex.split(listing) in commands
    assert "alertd-data" in quoted and ["docker", "volume", "create", "alertd-data"] in commands
