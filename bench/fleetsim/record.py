"""A run written out: the recording ``alertd replay FILE`` reads, and the ground truth to score it with.

``seed<N>-<route>.jsonl`` holds one ``{"received_at", "body"}`` per webhook,
as ``alertd serve --record`` writes them; ``seed<N>-<route>-truth.json`` the
problems (cause, nodes, page-worthy, the alerts they caused, when the first
reached alertd), times as seconds after ``start``. ``rescore`` scores what
``alertd replay FILE --json`` made of a recording, with any rules or config.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from alertd.core.model import iso, parse_iso

from bench.fleetsim.model import Problem
from bench.fleetsim.score import Score, score

from bench.fleetsim.run import RunResult
from bench.fleetsim.sim import START


def write_run(r: RunResult, directory: Path | str) -> tuple[Path, Path]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    recording = out / f"seed{r.seed}-{r.route}.jsonl"
    with recording.open("w", encoding="utf-8") as fh:
        for received, body in r.delivery.webhooks:
            fh.write(json.dumps({"received_at": iso(received), "body": body}, separators=(",", ":")) + "\n")
    truth = out / f"seed{r.seed}-{r.route}-truth.json"
    truth.write_text(json.dumps({"start": iso(START), "problems": [asdict(p) for p in r.fleet.problems.values()]}),
                     encoding="utf-8")
    return recording, truth


def rescore(truth_path: Path | str, report_path: Path | str, reopen_window: float) -> Score:
    """Score a saved ``alertd replay --json`` report against a saved ground truth (raises ValueError if unreadable)."""
    try:
        truth = json.loads(Path(truth_path).read_text(encoding="utf-8"))
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
        start = parse_iso(truth["start"])
        problems = {}
        for d in truth["problems"]:
            p = Problem(**d)
            p.alerts = [(fp, t) for fp, t in p.alerts]
            p.spells = [(a, b) for a, b in p.spells]
            p.names = tuple(p.names)
            problems[p.id] = p
        _ = report["incidents"], report["notifications"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot rescore {report_path} against {truth_path}: {type(exc).__name__}: {exc}") from exc
    if start is None:
        raise ValueError(f"{truth_path}: start is empty")
    return score(report, problems, start, reopen_window)
