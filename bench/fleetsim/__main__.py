"""``python -m bench.fleetsim``: seeds x routes, one line of figures each (or --json)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from bench.fleetsim.alertmanager import ROUTES
from bench.fleetsim.builder import Rates
from bench.fleetsim.job_score import job_line
from bench.fleetsim.response import People
from bench.fleetsim.run import RunResult, run_one
from bench.fleetsim.sim import RECONCILE_EVERY
from bench.fleetsim.rules import SHIPPED

HEADER = (f"{'seed':>4} {'route':<9} {'probs':>5} {'worthy':>6} {'inc/prob':>8} {'split':>5} {'gap':>3} "
          f"{'mixed':>5} {'recall':>6} {'<=5m':>6} {'false':>5} {'pg/wrth':>7} {'posts/p':>7} "
          f"{'storms inc/pages':<18} {'unseen':>6} {'named':>6} {'repair 1x/n (pg)':<16} {'sim s':>6} {'replay s':>8}")


def line(r: RunResult) -> str:
    s = r.score
    storms = " ".join(f"{st.incidents}/{st.pages}" for st in s.storms)
    once = sum(1 for n in s.repair_pages.values() if n == 1)
    repairs = f"{once}/{len(s.repair_pages)} ({sum(s.repair_pages.values())})"
    return (f"{r.seed:>4} {r.route:<9} {s.problems:>5} {s.page_worthy:>6} {s.incidents_per_problem:>8.3f} "
            f"{s.split:>5} {s.split_by_gap:>3} {s.mixed:>5} {s.recall:>6.1%} {s.recall_5m:>6.1%} "
            f"{s.false_pages:>5} {s.pages_per_page_worthy:>7.3f} {s.posts_per_problem:>7.3f} {storms:<18} "
            f"{len(s.unseen):>6} {s.named:>6.1%} {repairs:<16} {r.simulate_s:>6.1f} {r.replay_s:>8.1f}")


def history_line(h: dict[str, object]) -> str:
    """One history case: its incident(s), pages, and the verdict it got (or "no verdict")."""
    got = f"verdict {h['verdict']}: {h['line']}" if h["verdict"] else "no verdict"
    want = h["expect"] or "none"
    return (f"     history {'ok ' if h['ok'] else 'BAD'} {h['problem']} on {h['node']}: "
            f"{', '.join(map(str, h['incidents'])) or 'no incident'} paged {h['pages']}x; {got} (expected {want})")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.fleetsim", description=__doc__)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    ap.add_argument("--route", choices=[*ROUTES, "both"], default="both",
                    help="Alertmanager group_by: alertname=[alertname, cluster], node=[alertname, cluster, node]")
    ap.add_argument("--people", action="store_true",
                    help="operators and alertd's remediation answer the faults and the driver-rollout storm "
                         "(bench/fleetsim/response.py): cordons after the storm's alerts resolved, batched reboots, "
                         "swaps, failed repairs")
    ap.add_argument("--history", action="store_true",
                    help="add the faults with a past (bench/fleetsim/history.py): a GPU's third Xid 79 in 7 days and "
                         "a repair that did not hold; each is listed with its pages and history verdict")
    ap.add_argument("--jobs", action="store_true",
                    help="add training jobs (bench/fleetsim/jobs.py): hangs without an Xid (network, NIC, NCCL, "
                         "silent corruption), stragglers, quiet GPUs, an NVLink clique fault, healthy pauses; the "
                         "job rules are evaluated too and scored on a second line")
    ap.add_argument("--job-rules", default=None,
                    help="the job rules file (default deploy/prometheus/gpu-job-alerts.yml)")
    ap.add_argument("--interval", type=float, default=30.0, help="rule evaluation interval, seconds")
    ap.add_argument("--no-staleness-markers", action="store_true",
                    help="series of a failed scrape stay visible for the 5-minute lookback instead of going stale")
    ap.add_argument("--prometheus-rules", default=str(SHIPPED), help="the Prometheus rule file to evaluate")
    ap.add_argument("--rules", action="append", help="alertd rule files (default: the shipped rules/)")
    ap.add_argument("--dup-probability", type=float, default=None,
                    help="chance that the second Alertmanager peer sends a flush too (default 0.02)")
    ap.add_argument("--reopen-window", type=float, default=None,
                    help="seconds: a problem split across a longer gap is not counted as split "
                         "(default: the rules' correlation reopen window, else the hold-down)")
    ap.add_argument("--reconcile-interval", type=float, default=RECONCILE_EVERY,
                    help="seconds between alertd's reconciliation rounds against the emulated Alertmanager's API, "
                         f"which take in the alerts no webhook carried (default alertd's {RECONCILE_EVERY:g}; "
                         "0: webhooks only)")
    ap.add_argument("--record", metavar="DIR",
                    help="also write each run's webhooks (for `alertd replay FILE`) and ground truth to DIR")
    ap.add_argument("--rescore", nargs=2, metavar=("TRUTH", "REPORT"),
                    help="only score REPORT (alertd replay FILE --json) against TRUTH (written by --record)")
    ap.add_argument("--json", action="store_true", help="one JSON document with every run's figures")
    ap.add_argument("--details", action="store_true", help="with --json: list missed, late and false pages")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        print(f"--seeds: not a comma-separated list of integers: {args.seeds!r}", file=sys.stderr)
        return 2
    if args.rescore:
        return rescore_main(args)
    routes = list(ROUTES) if args.route == "both" else [args.route]
    results = []
    if not args.json:
        print(f"# {args.nodes} nodes x {args.days:g} days, evaluation every {args.interval:g} s"
              f"{', with operator response' if args.people else ''}, reconciliation "
              f"{f'every {args.reconcile_interval:g} s' if args.reconcile_interval else 'off'}; "
              "columns: docs/fleet-simulation.md")
        print(HEADER)
    for seed in seeds:
        for route in routes:
            r = run_one(nodes=args.nodes, days=args.days, seed=seed, route=route, interval=args.interval,
                        rule_paths=args.rules, prometheus_rules=args.prometheus_rules,
                        dup_probability=args.dup_probability, reopen_window=args.reopen_window,
                        rates=Rates(people=People() if args.people else None, history=args.history, jobs=args.jobs),
                        lookback=300.0 if args.no_staleness_markers else 0.0, job_rules=args.job_rules,
                        reconcile_every=args.reconcile_interval)
            results.append(r)
            if args.record:
                from bench.fleetsim.record import write_run

                write_run(r, args.record)
            if not args.json:
                print(line(r), flush=True)
                for h in r.score.history:
                    print(history_line(h), flush=True)
                if r.jobs is not None:
                    print(job_line(r.jobs), flush=True)
    if args.json:
        out = []
        for r in results:
            d = r.score.as_dict()
            if not args.details:
                for k in ("missed", "late", "false", "splits", "mixes", "unnamed"):
                    d[k] = len(d[k])
                del d["late_by"]
            if r.jobs is not None:
                d["jobs"] = r.jobs.as_dict()
            out.append({"seed": r.seed, "route": r.route, "nodes": args.nodes, "days": args.days,
                        "simulate_s": round(r.simulate_s, 2), "replay_s": round(r.replay_s, 2),
                        "delivery": r.delivery.stats(), **d})
        json.dump(out, sys.stdout, indent=2)
        print()
    return 0


def rescore_main(args: argparse.Namespace) -> int:
    from bench.fleetsim.record import rescore

    try:
        truth, report = args.rescore
        s = rescore(truth, report, args.reopen_window if args.reopen_window is not None else 1800.0)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    json.dump(s.as_dict(), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
