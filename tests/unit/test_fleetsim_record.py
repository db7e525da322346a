"""A simulated run written out, replayed by `alertd replay FILE --json`, and scored again from the files."""
from __future__ import annotations

import io
import json

from alertd.authoring.replay import main as replay_main

from bench.fleetsim.record import rescore, write_run
from bench.fleetsim.run import run_one


def test_a_recorded_run_replays_and_rescores_like_the_run(tmp_path):
    r = run_one(nodes=128, days=3, seed=1, route="node")
    recording, truth = write_run(r, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert replay_main(str(recording), rule_paths=None, config=None, as_json_output=True, tail=None, until=None,
                       out=out, err=err) == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["summary"]["webhooks"] == len(r.delivery.webhooks) and report["summary"]["rejected"] == 0
    (tmp_path / "report.json").write_text(out.getvalue())
    again = rescore(truth, tmp_path / "report.json", r.score.reopen_window)
    # The CLI keeps the routes' mute windows, so pages may differ; incidents may not.
    for name in ("problems", "page_worthy", "incidents", "incidents_per_problem", "split", "mixed", "orphans"):
        assert getattr(again, name) == getattr(r.score, name), name
    assert [(s.incidents) for s in again.storms] == [(s.incidents) for s in r.score.storms]
