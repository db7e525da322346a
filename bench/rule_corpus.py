"""The GPU rule corpus (tests/fixtures/gpu-rule-corpus), rendered by promtool and read by alertd: per exporter,
GPU rules classified right, alerts on a wrong node, node-less rules and whether `check` names them, warnings on
rules the site declared not GPU health, rules `check` and `explain` read alike. Prints a markdown table
(docs/rules.md); --rules lists every rule, and what each command read where they differ.

    python -m bench.rule_corpus [--rules]
"""
from __future__ import annotations

import sys


from testkit.rule_corpus import markdown, run_corpus, table  # noqa: E402


def main(argv: list[str]) -> int:
    outcomes = run_corpus()
    if "--rules" in argv:
        for case in outcomes:
            for r in case.rules:
                state = "ok" if r.right or not r.gpu_health else "WRONG"
                print(f"{case.name:<32} {r.alert:<34} {state:<5} fired={r.fired} wrong_node={r.wrong_node} "
                      f"no_node={r.no_node} check_named={r.check_named} warned={r.warned} {'; '.join(r.why)}"
                      + ("" if r.agree else f" check={r.checked!r} explain={sorted(r.explained)}"))
            print(f"{case.name:<32} promtool rc={case.promtool_rc} check rc={case.check_rc}")
    print(markdown(table(outcomes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
