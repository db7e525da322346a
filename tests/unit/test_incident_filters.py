"""The incident list's filters are one list: the API takes, the UI shows, the CLI passes and the OpenAPI
document describes the same ones."""
from __future__ import annotations

import argparse
import io
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from alertd.cli import api_client
from alertd.core.incident_filters import FILTER_NAMES, INCIDENT_FILTERS
from alertd.web.params import PAGING, BadParam, incident_query

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "alertd" / "web" / "openapi.yaml").read_text())


@pytest.mark.parametrize("path", ["/api/v1/incidents", "/ui/incidents"])
def test_openapi_describes_every_filter(path: str) -> None:
    names = [p["name"] for p in SPEC["paths"][path]["get"]["parameters"]]
    assert names[:len(FILTER_NAMES)] == list(FILTER_NAMES)
    assert set(names[len(FILTER_NAMES):]) <= set(PAGING) | {"fragment", "sort"}


def test_the_api_takes_every_filter_and_names_an_unknown_one() -> None:
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    q, gpu = incident_query({"node": "gpu-node-7", "xid": "79", "gpu": "GPU-1", "since": "1h"}, now)
    assert (q.node, q.xid, gpu, q.since) == ("gpu-node-7", "79", "GPU-1", datetime(2026, 11, 30, 23, tzinfo=timezone.utc))
    with pytest.raises(BadParam) as err:
        incident_query({"gpus": "GPU-1"}, now)
    assert err.value.field == "gpus" and "until" in err.value.message


def test_the_cli_has_a_flag_per_filter_and_passes_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    api_client.add_parsers(parser.add_subparsers(dest="command"))
    flags = [f"--{f.name}" for f in INCIDENT_FILTERS]
    values = {f.name: f"v-{f.name}" for f in INCIDENT_FILTERS}
    args = parser.parse_args(["incidents", "list", *[x for f in flags for x in (f, f"v-{f[2:]}")]])
    sent: list[list[tuple[str, object]]] = []

    def call(_args: argparse.Namespace, method: str, path: str, params: list[tuple[str, object]]) -> dict[str, object]:
        sent.append(params)
        return {"incidents": [], "next": None}

    monkeypatch.setattr(api_client, "call", call)
    api_client._list_incidents(args, io.StringIO())
    assert {k: v for k, v in sent[0] if k in values} == values
    assert ("sort", None) in sent[0], "the API's order (the worst first) unless asked"
    api_client._list_incidents(parser.parse_args(["incidents", "list", "--sort", "newest"]), io.StringIO())
    assert ("sort", "newest") in sent[1]
