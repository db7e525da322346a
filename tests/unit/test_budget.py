"""The classification budget measures each alert's CPU with one clock read per alert."""
from __future__ import annotations

from alertd.app.budget import Budget
from alertd.core.model import Alert
from testkit.builders import alert


class Engine:
    """Prepares alerts as the engine would; the alert named ``boom`` raises."""

    def prepare(self, a: Alert) -> Alert:
        if a.name == "boom":
            raise ValueError("rule tripped")
        return a


def test_each_alert_is_charged_the_cpu_between_its_start_and_end_and_no_more():
    # Clock reads: batch start 0; "slow" ends at 2.0 (2 s: over); "boom" fails, read at 2.1 (the next start);
    # "fast" ends at 2.2 (0.1 s: under, though the failure before it took time too).
    reads = iter([0.0, 2.0, 2.1, 2.2])
    budget = Budget(cpu_per_alert=0.5, cpu_clock=lambda: next(reads))
    batch = [("k1", alert("slow")), ("k2", alert("boom")), ("k3", alert("fast"))]
    out = budget._run(Engine(), batch)  # type: ignore[arg-type]
    assert [k for k, _ in out.ok] == ["k3"]
    assert [(k, cause) for k, _, cause, _ in out.aside] == [("k1", "overran"), ("k2", "failed")]
    assert out.worst == 2.0
    budget.close()
