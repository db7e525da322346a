"""`alertd incidents|gpus|rma` against a running alertd (in-process, real socket), like amtool."""
from __future__ import annotations

import asyncio
import csv
import io
import json
from argparse import Namespace

import pytest

from alertd.cli.main import main
from alertd.cli.api_client import token_of
from testkit import ui_scenario as sc
from testkit.notify_harness import Harness


@pytest.fixture
async def fleet(tmp_path):
    h = await Harness(tmp_path).start()
    ids = await sc.build(h)
    yield h, ids, str(h.client.make_url("")).rstrip("/")
    await h.stop()


async def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def test_incidents_list_filters_and_prints_a_table_or_json(fleet, capsys):
    h, ids, url = fleet
    code, out, _ = await cli(capsys, "incidents", "list", "--url", url, "--gpu", sc.SERIAL)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:5] == ["ID", "STATUS", "SEVERITY", "NODE", "XIDS"]
    assert [ln.split()[0] for ln in lines[1:]] == [ids["b07"], ids["a01_2"], ids["a01_1"]]
    code, out, _ = await cli(capsys, "incidents", "list", "--url", url, "--xid", "79", "-o", "json")
    assert code == 0 and {i["id"] for i in json.loads(out)["incidents"]} == {ids["a01_1"], ids["a01_2"]}
    code, out, _ = await cli(capsys, "incidents", "list", "--url", url, "--limit", "2", "--all", "-o", "json")
    assert code == 0 and len(json.loads(out)["incidents"]) == 5


async def test_ack_resolve_and_a_silence_alertd_cannot_make(fleet, capsys):
    h, ids, url = fleet
    code, out, _ = await cli(capsys, "incidents", "ack", ids["c02"], "--url", url)
    assert code == 0 and out.strip() == f"{ids['c02']}: ack done; now acknowledged"
    assert (await h.incident(ids["c02"]))["acknowledgedBy"] == "anonymous"
    code, out, _ = await cli(capsys, "incidents", "ack", ids["c02"], "--url", url)  # again, as a script would
    assert code == 0 and out.strip() == f"{ids['c02']}: already acknowledged; nothing to do"
    code, _, err = await cli(capsys, "incidents", "silence", ids["b07"], "--duration", "90m", "--url", url)
    assert code == 1 and "HTTP 502" in err and "alertmanager.url" in err  # 90m is a duration it takes
    code, _, err = await cli(capsys, "incidents", "silence", ids["b07"], "--duration", "9d", "--url", url)
    assert code == 1 and "HTTP 400" in err and "a silence lasts from 1m to 7d" in err
    code, out, _ = await cli(capsys, "incidents", "resolve", ids["c02"], "--url", url, "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "resolved"


async def test_gpus_list_show_and_rma_export(fleet, capsys):
    h, ids, url = fleet
    code, out, _ = await cli(capsys, "gpus", "show", "0000:BA:00.0", "--url", url)
    assert code == 0 and out.startswith(f"{sc.MOVED_UUID}  serial {sc.SERIAL}")
    assert "now in gpu-b07 (prod); failing: " + ids["b07"] in out
    assert [ln.split()[0] for ln in out.split("  nodes:\n")[1].splitlines()[:2]] == ["gpu-a01", "gpu-b07"]
    code, out, _ = await cli(capsys, "gpus", "list", "--url", url, "--node", "gpu-b07")
    assert code == 0 and out.splitlines()[1].split()[0] == sc.MOVED_UUID and len(out.splitlines()) == 2
    code, out, _ = await cli(capsys, "rma", "--url", url, "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["uuid"] for r in rows] == [sc.MOVED_UUID]
    code, out, _ = await cli(capsys, "rma", "--url", url)
    assert code == 0 and "xid79-repeat" in out.splitlines()[1]


async def test_path_parts_are_encoded_and_errors_are_one_line(fleet, capsys):
    _, _, url = fleet
    code, _, err = await cli(capsys, "gpus", "show", "GPU-x/../../api/v1/incidents", "--url", url)
    assert code == 1 and "HTTP 404" in err and "no GPU known by GPU-x/../../api/v1/incidents" in err
    code, _, err = await cli(capsys, "incidents", "list", "--url", "http://127.0.0.1:9", "--timeout", "2")
    assert code == 1 and err.startswith("alertd incidents: cannot reach alertd at http://127.0.0.1:9")


async def test_explain_reads_a_stored_incident_through_the_same_client(fleet, capsys):
    """``explain --incident`` calls the API like the other commands: same token sources, one-line errors."""
    _, ids, url = fleet
    code, out, err = await cli(capsys, "explain", "--incident", ids["a01_1"], "--url", url)
    assert code == 0 and ids["a01_1"] in out, err
    code, _, err = await cli(capsys, "explain", "--incident", "INC-404", "--url", url)
    assert code == 1 and err.startswith("alertd explain: GET /api/v1/incidents/INC-404: HTTP 404")
    code, _, err = await cli(capsys, "explain", "--incident", "INC-1", "--url", "http://127.0.0.1:9", "--timeout", "2")
    assert code == 1 and err.startswith("alertd explain: cannot reach alertd at http://127.0.0.1:9")


def test_token_sources_in_order(tmp_path, monkeypatch):
    f = tmp_path / "token"
    f.write_text("from-file\nold-one\n")
    monkeypatch.setenv("ALERTD_API_TOKEN", "from-env")
    assert token_of(Namespace(token="given", token_file=str(f))) == "given"
    assert token_of(Namespace(token=None, token_file=str(f))) == "from-file"
    assert token_of(Namespace(token=None, token_file=None)) == "from-env"
    monkeypatch.setenv("ALERTD_API_TOKEN_FILE", str(f))
    assert token_of(Namespace(token=None, token_file=None)) == "from-file"


async def test_url_without_a_scheme_is_http(fleet, capsys):
    h, ids, url = fleet
    code, out, _ = await cli(capsys, "incidents", "list", "--url", url.removeprefix("http://"), "-o", "json")
    assert code == 0 and len(json.loads(out)["incidents"]) == 5
    code, _, err = await cli(capsys, "incidents", "list", "--url", "ftp://" + url.removeprefix("http://"))
    assert code == 1 and "give http(s)://HOST:PORT or HOST:PORT" in err


async def test_show_on_a_fleet_incident_prints_its_nodes(tmp_path, capsys):
    from datetime import datetime, timedelta, timezone

    from testkit.notify_harness import hook, wait_for, xid_alert

    h = await Harness(tmp_path).start()
    try:
        starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
        nodes = [f"gpu-node-{n:02d}" for n in range(6)]
        for node in nodes:
            await h.post(hook(xid_alert(node, 1, starts=starts), node=node))

        async def fleet() -> dict | None:
            return next((r for r in await h.incidents() if r.get("fleet") and len(r["children"]) == 6), None)

        inc = await wait_for(fleet)
        code, out, _ = await cli(capsys, "incidents", "show", inc["id"], "--url", str(h.client.make_url("")).rstrip("/"))
        assert code == 0 and f"  nodes (6): {', '.join(nodes)}" in out, out
        assert all(child in out for child in inc["children"])
    finally:
        await h.stop()


async def test_explain_incident_and_audit_read_a_locked_alertd_with_a_token_file(tmp_path, capsys):
    """explain --incident used a second API client that ignored token files; audit had no --url."""
    from alertd.config.settings import parse_config
    from testkit.notify_harness import hook, xid_alert

    admin = "adm1n-t0ken-0123456789"
    h = Harness(tmp_path)
    h.cfg = parse_config({**h.cfg.raw, "api": {"auth": {"tokens": [{"name": "ops", "role": "admin", "token": admin}]}}},
                         "test")
    await h.start()
    try:
        h.client.session.headers["Authorization"] = f"Bearer {admin}"
        await h.post(hook(xid_alert("gpu-node-2", 4), node="gpu-node-2"))
        inc = await h.one_incident()
        token_file = tmp_path / "token"
        token_file.write_text(admin + "\n")
        url = str(h.client.make_url("")).rstrip("/").removeprefix("http://")  # host:port, no scheme
        code, out, err = await cli(capsys, "explain", "--incident", inc["id"], "--url", url, "--token-file", str(token_file))
        assert code == 0 and "GPUXidError" in out and "signal  xid" in out, err
        code, _, err = await cli(capsys, "explain", "--incident", inc["id"], "--url", url)
        assert code == 1 and "HTTP 401" in err  # no token: said in words, no traceback
        code, out, _ = await cli(capsys, "incidents", "ack", inc["id"], "--url", url, "--token-file", str(token_file))
        assert code == 0
        code, out, err = await cli(capsys, "audit", "--url", url, "--token-file", str(token_file), "--since", "1h")
        assert code == 0 and out.split()[1:5] == ["ops", "ack", inc["id"], "via"], (out, err)
    finally:
        await h.stop()
