"""The amtool-like half of the CLI: `alertd incidents|gpus|rma` against a running alertd's API.

The token comes from --token, --token-file, $ALERTD_API_TOKEN or
$ALERTD_API_TOKEN_FILE (in that order); query parameters and path parts are
URL-encoded. Output is an aligned table, or ``-o json`` (the API's own JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO
from urllib.parse import quote, urlencode

from alertd.core.json_types import JSONObject, as_array, member, objects
from alertd.core.incident_filters import FILTER_NAMES, INCIDENT_FILTERS
from alertd.core.verbs import by_word, words
from alertd.core.words import counted
from alertd.integrations.presentation import event_words

DEFAULT_URL = "http://127.0.0.1:9095"
MAX_PAGES = 100  # --all follows at most this many pages


class ApiError(RuntimeError):
    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status  # the HTTP status alertd answered with; 0 when it was not reached


# What an action leaves the incident in: doing it again is no failure (a second `ack` in a script).
DONE_STATE = {"ack": ("acknowledged",), "resolve": ("resolved", "closed")}


def base_url(url: str) -> str:
    """``host:port`` means http://host:port (as amtool and curl take it); anything but http(s) is refused."""
    text = url.strip().rstrip("/")
    if "://" not in text:
        text = "http://" + text
    scheme, _, rest = text.partition("://")
    if scheme.lower() not in ("http", "https") or not rest or rest.startswith("/"):
        raise ApiError(f"--url {url!r}: give http(s)://HOST:PORT or HOST:PORT")
    return text


def token_of(args: argparse.Namespace) -> str:
    if getattr(args, "token", None):
        return str(args.token)
    path = getattr(args, "token_file", None) or os.environ.get("ALERTD_API_TOKEN_FILE", "")
    if path:
        try:
            return Path(path).read_text().strip().splitlines()[0].strip()
        except (OSError, IndexError) as exc:
            raise ApiError(f"cannot read the token file {path}: {exc}") from None
    return os.environ.get("ALERTD_API_TOKEN", "")


def call(args: argparse.Namespace, method: str, path: str, params: Iterable[tuple[str, Any]] = (),
         raw: bool = False) -> Any:
    query = urlencode([(k, str(v)) for k, v in params if v not in (None, "")])
    url = base_url(args.url) + path + (f"?{query}" if query else "")
    headers = {"Accept": "application/json"}
    if token := token_of(args):
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method=method, headers=headers, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=args.timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        try:
            text = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            pass
        raise ApiError(f"{method} {path}: HTTP {exc.code}: {text}", exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ApiError(f"cannot reach alertd at {args.url}: {exc}") from None
    return body.decode() if raw else json.loads(body)


def table(rows: list[list[Any]], header: list[str], out: TextIO) -> None:
    cells = [header] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def _id(value: str) -> str:
    return quote(value, safe="")


# ----- incidents -----

def incidents(args: argparse.Namespace, out: TextIO) -> int:
    if args.action == "list":
        return _list_incidents(args, out)
    if not args.id:
        raise ApiError(f"incidents {args.action} needs an incident id")
    if args.action == "show":
        return _show_incident(call(args, "GET", f"/api/v1/incidents/{_id(args.id)}"), args, out)
    params: list[tuple[str, Any]] = [("by", args.by)]
    if (verb := by_word(args.action)) is not None and verb.duration:
        params.append(("duration", args.duration))
    try:
        data = call(args, "POST", f"/api/v1/incidents/{_id(args.id)}/{args.action}", params)
    except ApiError as exc:
        current = call(args, "GET", f"/api/v1/incidents/{_id(args.id)}") if exc.status == 409 else {}
        if current.get("status") not in DONE_STATE.get(args.action, ()):
            raise
        out.write(f"{current['id']}: already {current['status']}; nothing to do\n")
        return 0
    if args.output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        silence = (data.get("annotations") or {}).get("silence") or {}
        extra = f" until {silence['endsAt']} (silence {silence['id']})" if args.action == "silence" and silence else ""
        out.write(f"{data['id']}: {args.action} done; now {data['status']}{extra}\n")
        for t in data.get("tickets") or [] if args.action == "rma" else []:
            out.write(f"  {t['system']} {t['key']} {t['url']}\n")
    return 0


def _list_incidents(args: argparse.Namespace, out: TextIO) -> int:
    params = [(k, getattr(args, k)) for k in FILTER_NAMES] + [("limit", args.limit), ("sort", args.sort)]
    rows: list[JSONObject] = []
    cursor = None
    for _ in range(MAX_PAGES if args.all else 1):
        data = call(args, "GET", "/api/v1/incidents", params + [("cursor", cursor)])
        rows += data["incidents"]
        cursor = data.get("next")
        if not cursor:
            break
    if args.output == "json":
        out.write(json.dumps({"incidents": rows, "next": cursor}, indent=2) + "\n")
        return 0
    table([[ident, i["status"], i["severity"], i.get("node") or counted(len(as_array(i.get('nodes'))), "node"),
            ",".join(map(str, as_array(i.get("xids")))), str(i["openedAt"])[:19].replace("T", " "), i["title"]]
           for ident, i in as_tree(rows)],
          ["ID", "STATUS", "SEVERITY", "NODE", "XIDS", "OPENED", "TITLE"], out)
    if cursor:
        out.write("(more incidents: narrow the filters, raise --limit or pass --all)\n")
    return 0


def as_tree(rows: list[JSONObject]) -> list[tuple[str, JSONObject]]:
    """Each fleet incident followed by its node incidents on this page, indented under it; the others
    in the API's order (the worst first, as the web UI lists). A node whose fleet is not on the page stays
    where it is."""
    by_id = {str(r["id"]): r for r in rows}
    under: dict[str, list[JSONObject]] = {}
    for r in rows:
        if (parent := r.get("parentId")) in by_id:
            under.setdefault(str(parent), []).append(r)
    out: list[tuple[str, JSONObject]] = []
    for r in rows:
        if r.get("parentId") in by_id:
            continue
        out.append((str(r["id"]), r))
        kids = under.get(str(r["id"]), [])
        out += [(("└ " if n == len(kids) - 1 else "├ ") + str(k["id"]), k) for n, k in enumerate(kids)]
    return out


def _show_incident(data: JSONObject, args: argparse.Namespace, out: TextIO) -> int:
    """``GET /api/v1/incidents/{id}``'s answer, as text."""
    if args.output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    out.write(f"{data['id']}  {data['status']}  {data['severity']}  {data['title']}\n")
    out.write(f"  key: {data['key']}  opened: {data['openedAt']}  resolved: {data.get('resolvedAt') or '-'}\n")
    primary, nodes = member(data, "primary"), [str(n) for n in as_array(data.get("nodes"))]
    verdict = member(data, "verdict")
    action = verdict.get("action") or primary.get("action")  # what the page says: the history verdict's first
    if action:
        out.write(f"  action: {action}  runbook: {primary.get('runbook', '')}\n")
    if verdict.get("line"):
        out.write(f"  history: {verdict['line']} (the catalog's action: {primary.get('action') or '-'})\n")
    if data.get("fleet") or len(nodes) > 1:  # a fleet incident: its nodes are the point
        out.write(f"  nodes ({len(nodes)}): {', '.join(nodes) or '-'}\n")
    if data.get("children"):
        out.write(f"  node incidents: {', '.join(map(str, as_array(data['children'])))}\n")
    for note in as_array(data.get("routingNotes")):
        out.write(f"  quiet: {note}\n")
    for g in objects(data.get("gpus")):
        out.write(f"  gpu: {g.get('index', '?')} {g.get('uuid', '')} {g.get('pci_bus_id', '')}\n")
    out.write("  members:\n")
    for m in objects(data.get("members")):
        out.write(f"    {m['status']:8} {m['alertname']:28} {member(m, 'signal').get('title', '')}\n")
    out.write("  timeline:\n")
    for e in objects(data.get("timeline")):
        out.write(f"    {e['at']}  {event_words(str(e['kind'])):24} {e.get('text', '')}\n")
    return 0


# ----- GPUs and RMA -----

def gpus(args: argparse.Namespace, out: TextIO) -> int:
    if args.action == "show":
        if not args.ident:
            raise ApiError("gpus show needs a GPU UUID, serial or PCI id")
        data = call(args, "GET", f"/api/v1/gpus/{_id(args.ident)}")
        if args.output == "json":
            out.write(json.dumps(data, indent=2) + "\n")
            return 0
        g, state = data["gpu"], data["state"]
        out.write(f"{g['uuid']}  serial {g['serial'] or '-'}  pci {g['pci_bus_id'] or '-'}  {g['model']}\n")
        out.write(f"  now in {g['node']} ({g['cluster']}); {state['status']}"
                  + (f": {', '.join(state['openIncidents'])}" if state["openIncidents"] else "") + "\n")
        out.write("  nodes:\n")
        for s in data["nodes"]:
            out.write(f"    {s['node']:20} {s['first'][:19]} .. {s['last'][:19]}  {counted(s['incidents'], 'incident')}\n")
        out.write("  incidents:\n")
        table([[r["incident"], r["status"], r["node"], ",".join(map(str, r["xids"])), r["openedAt"][:19], r["title"]]
               for r in data["incidents"]], ["    ID", "STATUS", "NODE", "XIDS", "OPENED", "TITLE"], out)
        return 0
    data = call(args, "GET", "/api/v1/gpus", [("node", args.node), ("gpu", args.ident), ("limit", args.limit)])
    if args.output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    table([[g["uuid"], g["serial"], g["pci_bus_id"], g["node"], g["last_incident"], g["last_seen"][:19]]
           for g in data["gpus"]], ["UUID", "SERIAL", "PCI", "NODE", "LAST INCIDENT", "LAST SEEN"], out)
    return 0


def rma(args: argparse.Namespace, out: TextIO) -> int:
    if args.output == "csv":
        out.write(call(args, "GET", "/api/v1/rma-candidates", [("format", "csv"), ("limit", 1000)], raw=True))
        return 0
    data = call(args, "GET", "/api/v1/rma-candidates", [("limit", 1000)])
    if args.output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    table([[c["uuid"], c["gpu"].get("serial", ""), c["gpu"].get("node", ""), ",".join(c["rules"]),
            ",".join(e["incident"] for e in c["evidence"])] for c in data["candidates"]],
          ["UUID", "SERIAL", "NODE", "RULES", "EVIDENCE"], out)
    return 0


# ----- audit -----

def audit_line(entry: JSONObject) -> str:
    """One audit entry as ``alertd audit`` prints it, read from the store or from the API."""
    outcome = "" if entry["outcome"] == "ok" else f"  [{entry['outcome']}]"
    return f"{entry['at']}  {entry['actor']:30} {entry['action']:12} {entry['target']:14} via {entry['via']}{outcome}"


def audit(args: argparse.Namespace, since: str) -> int:
    """``alertd audit --url``: the trail from a running alertd's API (an admin token), for a store this machine
    cannot open (PostgreSQL elsewhere, a pod's volume)."""
    def show(a: argparse.Namespace, out: TextIO) -> int:
        data = call(a, "GET", "/api/v1/audit", [("since", since), ("actor", a.actor), ("action", a.action),
                                                ("limit", a.limit)])
        for entry in reversed(data["entries"]):  # oldest first, like a log
            out.write((json.dumps(entry) if a.json else audit_line(entry)) + "\n")
        return 0
    return _run(show, args)


# ----- argument parsing -----

def connection(p: argparse.ArgumentParser, purpose: str = "", *, url: str | None = "") -> None:
    """Where the running alertd is and how to authenticate: every command that calls its API takes these.
    ``url``: the default (``None``: no API unless --url is given, as ``audit`` reads its store by default)."""
    p.add_argument("--url", default=os.environ.get("ALERTD_URL", DEFAULT_URL) if url == "" else url,
                   help="alertd base URL, http(s)://HOST:PORT or HOST:PORT (or ALERTD_URL)" + (f", {purpose}" if purpose else ""))
    p.add_argument("--token", help="API bearer token (or ALERTD_API_TOKEN)")
    p.add_argument("--token-file", help="file holding the token (or ALERTD_API_TOKEN_FILE)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an answer")


def _common(p: argparse.ArgumentParser, outputs: tuple[str, ...] = ("table", "json")) -> None:
    connection(p)
    p.add_argument("-o", "--output", choices=outputs, default="table")
    p.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")


def add_parsers(sub: Any) -> None:
    inc = sub.add_parser("incidents", help="list, show, acknowledge, resolve or silence incidents of a running alertd")
    inc.add_argument("action", choices=["list", "show", *words()],  # a verb's word (alertd/core/verbs.py)
                     help="rma: hand the incident's GPU(s) over for RMA (a ticket each, once approved)")
    inc.add_argument("id", nargs="?")
    for f in INCIDENT_FILTERS:
        inc.add_argument(f"--{f.name}", help=f"list: filter by {f.name}" + (f" ({f.hint})" if f.hint else ""))
    inc.add_argument("--limit", type=int, default=100)
    inc.add_argument("--sort", choices=["worst", "newest"], help="list: the worst first (open, critical; the "
                                                                 "default, as the web UI lists) or the newest first")
    inc.add_argument("--all", action="store_true", help="list: follow the pages")
    inc.add_argument("--duration", default="1h", help="silence: how long, a Prometheus duration (30m, 2h, 3d; at "
                                                      "most 7d)")
    inc.add_argument("--by", help="act on someone's behalf (admin tokens)")
    _common(inc)
    inc.set_defaults(func=lambda a: _run(incidents, a))

    g = sub.add_parser("gpus", help="GPUs and their history, from a running alertd")
    g.add_argument("action", choices=["list", "show"])
    g.add_argument("ident", nargs="?", help="UUID, serial or PCI id")
    g.add_argument("--node")
    g.add_argument("--limit", type=int, default=100)
    _common(g)
    g.set_defaults(func=lambda a: _run(gpus, a))

    r = sub.add_parser("rma", help="RMA candidates (the rma rules of rules/history.yml) with their evidence")
    _common(r, ("table", "json", "csv"))
    r.set_defaults(func=lambda a: _run(rma, a))


def _run(command: Callable[[argparse.Namespace, TextIO], int], args: argparse.Namespace) -> int:
    try:
        return command(args, sys.stdout)
    except ApiError as exc:
        print(f"alertd {args.command}: {exc}", file=sys.stderr)
        return 1
