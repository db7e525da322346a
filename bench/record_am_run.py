"""Record what the real Prometheus and a real, clustered Alertmanager deliver for a scripted set of GPU problems.

    python -m bench.record_am_run --out tests/fixtures/alertmanager-runs    # ~44 minutes
    python -m bench.record_am_run --scenario storm-response \
        --out tests/fixtures/alertmanager-runs/storm-response                # ~52 minutes
    python -m bench.record_am_run --scenario job-hang \
        --out tests/fixtures/alertmanager-runs/job-hang                      # ~36 minutes
    python -m bench.record_am_run --scale 0.05 --tail 60 --out /tmp/amrun  # a 3-minute check of the plumbing

A simulated cluster of 24 GPU nodes (testkit/sim/gpu_cluster.py) is scraped by the real Prometheus, which
evaluates the SHIPPED rules (deploy/prometheus/gpu-alerts.yml) at their real `for:` durations and sends to
two Alertmanager pairs. Each pair is two peers clustered by gossip on loopback, configured like
deploy/alertmanager/alertmanager.yml with group_wait 30s, group_interval 5m, repeat_interval 4h:

  by-node       group_by [cluster, node, alertname]  (the shipped grouping)
  by-alertname  group_by [alertname, cluster]        (a storm arrives as one growing group)

Each pair's webhook goes to its own ``alertd serve --record FILE``, so a recording is exactly what
Alertmanager delivered, both peers' deliveries included. The fault schedule and its ground truth are in
bench/am_run_scenario.py (``--scenario faults``, the default) or bench/am_run_storm_scenario.py
(``--scenario storm-response``: a driver-rollout storm and the operators' response) or
bench/am_run_job_scenario.py (``--scenario job-hang``: training jobs on testkit/sim/job_fleet.py, a hang caused by
one node's NIC, a straggler GPU, a quiet GPU and a healthy checkpoint pause, under the shipped gpu-alerts.yml and
gpu-job-alerts.yml); the run writes, into --out:

  <route>.jsonl       the recordings (``alertd replay`` input)
  groundtruth.json    the problems, and every fault step with the wall-clock time it was applied
  run.json            versions, configs and the command line

Loopback only; the run ends after the schedule plus --tail seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

from bench import am_run_job_scenario, am_run_scenario, am_run_storm_scenario  # noqa: E402
from testkit.sim.gpu_cluster import GPUClusterSim  # noqa: E402
from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.process import free_ports, find_binary  # noqa: E402
from testkit.services import _start_prometheus_family, start_prometheus  # noqa: E402

SCENARIOS = {"faults": am_run_scenario, "storm-response": am_run_storm_scenario, "job-hang": am_run_job_scenario}
GPU_RULES = REPO / "deploy/prometheus/gpu-alerts.yml"
TOKEN = "am-run-token"
ROUTES = {"by-node": ["cluster", "node", "alertname"], "by-alertname": ["alertname", "cluster"]}
TIMERS = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}
SCRAPE = "15s"  # scrape and rule evaluation interval, as on a typical production Prometheus
WARMUP_S = 60.0  # Prometheus has samples and the peers have settled before the first fault


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alertmanager_config(alertd_url: str, token_file: Path, group_by: list[str]) -> dict[str, Any]:
    """deploy/alertmanager/alertmanager.yml with the run's timers and grouping, its webhook at ``alertd_url``.

    The route and receiver for alerts about alertd itself (PagerDuty directly) are dropped: no such alert
    fires here, and the run must not reach outside loopback."""
    doc: dict[str, Any] = yaml.safe_load((REPO / "deploy/alertmanager/alertmanager.yml").read_text())
    route = doc["route"]
    route.update(TIMERS, group_by=group_by)
    route["routes"] = [r for r in route["routes"] if r.get("receiver") != "alertd-health"]
    for r in route["routes"]:
        if r.get("matchers") == ['alertname="Watchdog"']:
            r["group_by"] = [g for g in group_by if g != "node"]
    doc["receivers"] = [r for r in doc["receivers"] if r["name"] == "alertd"]
    hook = doc["receivers"][0]["webhook_configs"][0]
    hook["url"] = f"{alertd_url}/api/v1/alerts/alertmanager"
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return doc


def start_pair(name: str, config: Path, workdir: Path) -> list[Any]:
    """Two peers gossiping on loopback with Alertmanager's default cluster timings (peer timeout 15 s),
    each with its own external URL so a recording says which peer delivered."""
    ports = free_ports(2)
    peers = []
    for n, (own, other) in enumerate(zip(ports, reversed(ports)), 1):
        flags = ["--storage.path={data}", f"--cluster.listen-address=127.0.0.1:{own}",
                 f"--cluster.advertise-address=127.0.0.1:{own}", f"--cluster.peer=127.0.0.1:{other}",
                 f"--web.external-url=http://alertmanager-{name}-{n}.example:9093"]
        peers.append(_start_prometheus_family("alertmanager", find_binary("prometheus-alertmanager", "alertmanager"),
                                              config, workdir / f"{name}-{n}", flags, (), 90.0))
    return peers


def keep_configs(work: Path, out: Path, rule_files: list[Path]) -> None:
    """The exact configs of the run beside the recordings (the shipped files move on; the recording does not)."""
    configs = out / "config"
    configs.mkdir(exist_ok=True)
    for rules in rule_files:
        shutil.copyfile(rules, configs / rules.name)
    for name in ["prometheus.yml", *(f"alertmanager-{route}.yml" for route in ROUTES)]:
        text = (work / name).read_text()
        if name == "prometheus.yml":  # the rule files by their names in config/, not the run's absolute paths
            for rules in rule_files:
                text = text.replace(str(rules.resolve()), rules.name)
        (configs / name).write_text(text)


def version(binary: str) -> str:
    out = subprocess.run([find_binary(binary), "--version"], capture_output=True, text=True, timeout=30)
    return (out.stdout + out.stderr).strip().splitlines()[0]


def run_schedule(sim: Any, pairs: list[list[Any]], t0: float, log: list[dict[str, Any]], scale: float,
                 scenario: Any = am_run_scenario) -> None:
    """Apply each step at its time; stall_peer/resume_peer signal the given peer of every Alertmanager pair."""
    for step in scenario.schedule(scale):
        delay = t0 + step.at_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if step.action in ("stall_peer", "resume_peer"):
            for pair in pairs:
                os.kill(pair[step.kwargs["peer"] - 1].pid, signal.SIGSTOP if step.action == "stall_peer" else signal.SIGCONT)
        else:
            getattr(sim, step.action)(**step.kwargs)
        log.append({"at": utcnow(), "t_s": round(time.monotonic() - t0, 1), "planned_t_s": step.at_s,
                    "problem": step.problem, "action": step.action, **step.kwargs, "note": step.note})
        print(f"{log[-1]['at']} t={log[-1]['t_s']:7.1f}s {step.problem:22} {step.action} {step.kwargs}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the recordings, ground truth and run.json")
    p.add_argument("--workdir", help="service directories and logs (default: a new temp dir)")
    p.add_argument("--scale", type=float, default=1.0, help="shrink the fault schedule (plumbing checks only)")
    p.add_argument("--tail", type=float, default=420.0, help="seconds to record after the last step")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="faults", help="the fault schedule to run")
    args = p.parse_args(argv)
    scenario = SCENARIOS[args.scenario]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="amrun-"))
    work.mkdir(parents=True, exist_ok=True)
    token_file = work / "token"
    token_file.write_text(TOKEN)
    run: dict[str, Any] = {"started": utcnow(), "command": " ".join(["python", *sys.argv]), "scale": args.scale,
                           "scenario": args.scenario,
                           "prometheus": version("prometheus"),
                           "alertmanager": version("prometheus-alertmanager"), "configs": "config/"}
    rule_files: list[Path] = getattr(scenario, "RULE_FILES", [GPU_RULES])
    simulator = getattr(scenario, "simulator", lambda: GPUClusterSim(scenario.NODES, 8, cluster="sim"))
    with simulator().running_in_thread() as sim:
        recorders, targets = {}, []
        for name, group_by in ROUTES.items():
            recording = work / f"{name}.jsonl"
            alertd = AlertdProcess(work / f"alertd-{name}", {
                "rules": {"paths": [str(REPO / "rules")]}, "receiver": {"auth": {"bearer_token": TOKEN}},
            }, serve_args=["--record", str(recording)]).start()
            am_config = alertmanager_config(alertd.url, token_file, group_by)
            cfg_path = work / f"alertmanager-{name}.yml"
            cfg_path.write_text(yaml.safe_dump(am_config, sort_keys=False))
            peers = start_pair(name, cfg_path, work)
            targets.append([a.url.split("//", 1)[1] for a in peers])
            recorders[name] = (alertd, recording, peers)
        prom_cfg = sim.write_prometheus_config(work / "prometheus.yml", alertmanager_url="http://127.0.0.1:1",
                                               rule_files=rule_files,
                                               scrape_interval=SCRAPE, evaluation_interval=SCRAPE)
        doc = yaml.safe_load(prom_cfg.read_text())
        doc["alerting"]["alertmanagers"] = [{"static_configs": [{"targets": t}]} for t in targets]
        prom_cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
        prom = start_prometheus(prom_cfg, work / "prometheus")
        print(f"{utcnow()} running; work dir {work}; prometheus {prom.url}", flush=True)
        time.sleep(WARMUP_S)
        t0 = time.monotonic()
        run["t0"] = utcnow()
        steps: list[dict[str, Any]] = []
        try:
            run_schedule(sim, [peers for _, _, peers in recorders.values()], t0, steps, args.scale,
                         scenario)
            time.sleep(args.tail)
        finally:
            run["ended"] = utcnow()
            for _, _, peers in recorders.values():
                os.kill(peers[0].pid, signal.SIGCONT)  # never leave a stalled peer behind
            for alertd, _, _ in recorders.values():
                alertd.stop()
            prom.stop()
            for _, _, peers in recorders.values():
                for peer in peers:
                    peer.stop()
            for name, (_, recording, _) in recorders.items():
                if recording.exists():
                    shutil.copyfile(recording, out / f"{name}.jsonl")
            truth = {"t0": run["t0"], "nodes": scenario.NODES, "problems": [asdict(pr) for pr in scenario.problems()],
                     "steps": steps}
            (out / "groundtruth.json").write_text(json.dumps(truth, indent=1) + "\n")
            keep_configs(work, out, rule_files)
            (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    print(f"{utcnow()} done: {sorted(p.name for p in out.iterdir())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
