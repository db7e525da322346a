"""Each real service used by the integration tests starts and does real work.

Run with ``python -m pytest tests/integration/test_services_smoke.py -p tests.support.fixtures``.
"""

from __future__ import annotations

import pytest

from testkit import services
from tests.support.fixtures import require
from testkit.services import http_get, http_json

pytestmark = pytest.mark.services


def test_postgres_runs_queries_in_the_alertd_database(postgres):
    import psycopg

    with psycopg.connect(postgres.dsn, connect_timeout=5) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
        assert conn.execute("select current_database()").fetchone() == ("alertd",)
        assert conn.execute("show fsync").fetchone() == ("on",)
        conn.execute("create table smoke (id int primary key, note text)")
        conn.execute("insert into smoke values (1, 'xid 79')")
        assert conn.execute("select note from smoke where id = 1").fetchone() == ("xid 79",)
    assert postgres.dsn.startswith("postgresql://postgres@127.0.0.1:")


def _index_and_search(base_url: str) -> dict:
    doc = {
        "message": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
                   "GPU has fallen off the bus.",
        "source": "gpu-node-7",
        "timestamp": "2026-01-02 03:04:05.678",
    }
    status, body = http_json("PUT", f"{base_url}/smoke-services/_doc/1?refresh=true", doc)
    assert status == 201, body
    status, body = http_json("POST", f"{base_url}/smoke-services/_search", {
        "query": {"bool": {"must": [{"match": {"message": "fallen bus"}}],
                           "filter": [{"term": {"source.keyword": "gpu-node-7"}}]}},
    })
    assert status == 200, body
    return body


def test_opensearch_indexes_and_finds_a_document(opensearch):
    assert opensearch.url.startswith("http://127.0.0.1:")
    status, info = http_json("GET", opensearch.url + "/")
    assert status == 200 and info["version"]["distribution"] == "opensearch", info
    body = _index_and_search(opensearch.url)
    assert [hit["_id"] for hit in body["hits"]["hits"]] == ["1"]
    assert body["hits"]["hits"][0]["_source"]["source"] == "gpu-node-7"


def test_elasticsearch_works_with_the_v8_client(elasticsearch):
    from elasticsearch import Elasticsearch

    body = _index_and_search(elasticsearch.url)
    assert [hit["_id"] for hit in body["hits"]["hits"]] == ["1"]
    # The official client checks the product header on every response.
    client = Elasticsearch(elasticsearch.url, request_timeout=30)
    try:
        found = client.search(index="smoke-services", query={"match": {"message": "Xid"}})
        assert found["hits"]["total"]["value"] == 1
        assert client.cluster.health()["status"] in ("yellow", "green")
    finally:
        client.close()


def test_prometheus_answers_buildinfo(tmp_path):
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n")
    prom = require(services.start_prometheus, config, tmp_path)
    try:
        status, body = http_json("GET", prom.url + "/api/v1/status/buildinfo")
        assert status == 200 and body["status"] == "success", body
        assert body["data"]["version"].split(".")[0] in ("2", "3"), body
        # The lifecycle API is on, so end-to-end tests can reload configs.
        status, _ = http_json("POST", prom.url + "/-/reload")
        assert status == 200
    finally:
        prom.stop()
    assert not prom.alive()
    assert http_get(prom.url + "/-/ready", timeout=1)[0] == 0


def test_alertmanager_answers_status(tmp_path):
    port = services.free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route:\n"
        "  receiver: alertd\n"
        "  group_by: [alertname]\n"
        "receivers:\n"
        "  - name: alertd\n"
        "    webhook_configs:\n"
        f"      - url: http://127.0.0.1:{port}/webhook\n"
    )
    am = require(services.start_alertmanager, config, tmp_path)
    try:
        status, body = http_json("GET", am.url + "/api/v2/status")
        assert status == 200, body
        assert body["cluster"]["status"] == "disabled", body["cluster"]
        assert f"http://127.0.0.1:{port}/webhook" in body["config"]["original"]
    finally:
        am.stop()
    assert not am.alive()
