"""`alertd incidents list` shows a fleet with its nodes under it, and the README lists every doc."""
from __future__ import annotations

import re
from pathlib import Path

from alertd.cli.api_client import as_tree

ROOT = Path(__file__).resolve().parents[2]


def row(ident: str, parent: str = "", fleet: bool = False) -> dict:
    return {"id": ident, "parentId": parent, "fleet": fleet}


def test_a_fleet_lists_its_nodes_under_it():
    # Newest first (sort=newest; the worst-first order keeps them so when all are open and critical): the
    # fleet opened after its first nodes, before its last ones.
    rows = [row("INC-14", "INC-3"), row("INC-13", "INC-3"), row("INC-3", fleet=True), row("INC-2", "INC-3"),
            row("INC-1")]
    shown = [ident for ident, _ in as_tree(rows)]
    assert shown == ["INC-3", "├ INC-14", "├ INC-13", "└ INC-2", "INC-1"]


def test_a_node_whose_fleet_is_on_another_page_stays_in_place():
    rows = [row("INC-9"), row("INC-4", "INC-3"), row("INC-2")]
    assert [ident for ident, _ in as_tree(rows)] == ["INC-9", "INC-4", "INC-2"]


def test_the_readme_lists_every_doc():
    linked = set(re.findall(r"\]\(docs/([a-z0-9-]+\.md)\)", (ROOT / "README.md").read_text()))
    docs = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert docs <= linked, f"README.md does not link {sorted(docs - linked)}"
