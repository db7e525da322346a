"""The reliability report served by alertd in-process: the API (JSON, CSV, bad parameters), the page, the
/metrics gauges, and the weekly digest posted once across restarts and replicas (Slack test server)."""
from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest

from alertd.config.settings import parse_config
from alertd.store.sqlite import SqliteStore
from testkit.notify_harness import Harness, wait_for
from tests.unit.test_report_week import MON, WEEK, replay, week_fleet

SINCE, UNTIL = WEEK.since.date().isoformat(), WEEK.until.date().isoformat()


async def stored_week(tmp_path) -> SqliteStore:
    store = SqliteStore(tmp_path / "alertd.sqlite3")
    await store.open()
    await store.record_fleet_sample("prod", week_fleet(), MON + timedelta(hours=1))
    await replay(store)
    await store.close()
    return store


@pytest.fixture
async def served(tmp_path, slack):
    await stored_week(tmp_path)
    h = Harness(tmp_path, slack=slack)
    h.cfg = parse_config({**h.cfg.raw, "report": {"digest": {"channel": "#gpu-capacity", "weekday": "monday",
                                                                 "hour": 0}}}, "test")
    await h.start()
    yield h
    await h.stop()


async def test_api_answers_the_week_as_json_and_csv(served):
    resp = await served.client.get(f"/api/v1/reports/reliability?since={SINCE}&until={UNTIL}&cluster=prod")
    assert resp.status == 200
    r = await resp.json()
    assert (r["gpuDays"], r["failures"], r["failuresPer1000GpuDays"]) == (336, 4, round(4 / 336 * 1000, 3))
    assert [n["node"] for n in r["lemons"]["nodes"]] == ["gpu-node-1"]
    resp = await served.client.get(f"/api/v1/reports/reliability?since={SINCE}&until={UNTIL}&format=csv")
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/csv")
    rows = {(s, k): v for s, k, v in list(csv.reader(io.StringIO(await resp.text())))[1:]}
    assert rows[("summary", "failures")] == "4"
    other = await (await served.client.get(f"/api/v1/reports/reliability?since={SINCE}&until={UNTIL}"
                                           "&cluster=elsewhere")).json()
    assert other["failures"] == 0 and other["gpuDays"] == 0


@pytest.mark.parametrize("query, field", [("since=yesterday", "since"), ("until=2026-13-01", "until"),
                                          ("nodetype=x", "nodetype"), (f"since={UNTIL}&until={SINCE}", "until"),
                                          ("format=xlsx", "format")])
async def test_bad_parameters_are_named(served, query, field):
    resp = await served.client.get(f"/api/v1/reports/reliability?{query}")
    assert resp.status == 400
    assert (await resp.json())["field"] == field


async def test_the_page_shows_the_figures_and_serves_its_charting_library(served):
    resp = await served.client.get(f"/ui/reports/reliability?since={SINCE}&until={UNTIL}")
    text = await resp.text()
    assert resp.status == 200
    assert '<dd id="failures">4</dd>' in text and '<dd id="gpu-days">336.0</dd>' in text
    assert "gpu-node-1" in text and 'id="report-data"' in text
    lib = await served.client.get("/ui/static/chart.umd.js")
    assert lib.status == 200 and "Chart.js v4" in (await lib.text())[:200]


async def test_metrics_carry_the_figures(served):
    await wait_for(lambda: served.svc.reporting.collector.reports.get("30d") is not None)
    text = await (await served.client.get("/metrics")).text()
    assert 'alertd_fleet_gpus{cluster="prod",node_type="NVIDIA-H100-80GB-HBM3"} 32.0' in text
    assert 'alertd_reliability_failures_per_1000_gpu_days{window="30d"}' in text


async def test_a_scrape_during_a_refresh_sees_the_last_whole_snapshot(served, monkeypatch):
    """The windows' reports and the fleet are read with awaits between them; at each read of the fleet (the
    rollup's, the refresh's) the figures a scrape would see are all the last refresh's or all this one's."""
    reporting, collector = served.svc.reporting, served.svc.reporting.collector
    await wait_for(lambda: collector.reports.get("30d") is not None)
    before_reports, before_fleet = dict(collector.reports), collector.fleet
    seen: list[tuple[bool, bool]] = []  # at each read of the fleet: (reports still the last ones, fleet still the last)
    fleet_nodes = served.svc.store.fleet_nodes

    async def watched_fleet_nodes(*cluster):
        if not cluster:  # a read of the whole fleet (a report reads its cluster's)
            seen.append((all(collector.reports[w] is r for w, r in before_reports.items()),
                         collector.fleet is before_fleet))
        return await fleet_nodes(*cluster)

    monkeypatch.setattr(served.svc.store, "fleet_nodes", watched_fleet_nodes)
    await reporting.refresh(reporting.clock())
    assert seen and all(old_reports == old_fleet for old_reports, old_fleet in seen), seen
    assert all(collector.reports[w] is not r for w, r in before_reports.items()) and collector.fleet is not before_fleet
    assert 'alertd_fleet_gpus{cluster="prod",node_type="NVIDIA-H100-80GB-HBM3"} 32.0' in \
        await (await served.client.get("/metrics")).text()


async def test_the_digest_is_posted_once_across_restarts_and_replicas(served, slack, tmp_path):
    def digests() -> list[dict]:
        return [m for m in slack.all_messages() if "GPU fleet reliability" in m.get("text", "")]

    await wait_for(lambda: len(digests()) == 1)  # the loop's first round, at the start
    replica = Harness(tmp_path, slack=slack)
    replica.cfg = served.cfg
    await replica.start()  # a second replica on the same store, and a restart of the first
    served_again = Harness(tmp_path, slack=slack)
    served_again.cfg = served.cfg
    await served.stop()
    await served_again.start()
    try:
        for h in (replica, served_again):
            await h.svc.reporting.step()
            await h.svc.reporting.step()
        assert len(digests()) == 1
        later = served_again.svc.clock() + timedelta(days=7)
        for h in (replica, served_again):  # a week later, each replica tries twice: one more digest
            h.svc.reporting.clock = lambda: later
            await h.svc.reporting.step()
            await h.svc.reporting.step()
        assert len(digests()) == 2
        assert "hardware failures" in digests()[-1]["text"]
    finally:
        await replica.stop()
        await served_again.stop()
