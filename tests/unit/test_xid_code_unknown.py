"""An Xid without a code is still an Xid: on its node's incident, titled "code unknown",
its own severity, and upgraded when a later alert or the kernel log names the code."""
from __future__ import annotations

from alertd.core.findings import EvidenceLine
from alertd.enrich.log_evidence import upgrade_signal
from alertd.core.model import Alert

from testkit.builders import alert, at, engine

XID_URL = "http://prom:9090/graph?g0.expr=changes%28DCGM_FI_DEV_XID_ERRORS%5B5m%5D%29+%3E+0&g0.tab=1"


def unknown_xid(node: str = "n1", gpu: str = "3", summary: str = "GPU 3 reported an Xid", **labels: str) -> Alert:
    a = alert("SiteGpuXid", node=node, gpu=gpu, UUID=f"GPU-{node}-{gpu}", pci_bus_id="00000000:5D:00.0",
              annotations={"summary": summary}, **{"severity": "critical", **labels})
    a.generator_url = XID_URL
    return a


def test_code_unknown_xid_joins_the_node_incident_with_its_own_severity():
    e = engine()
    changes = e.ingest([
        unknown_xid(),
        alert("DCGMExporterDown", node="n1", starts=30, job="dcgm-exporter"),
        alert("KubeNodeCordoned", node="n1", starts=60, severity="info"),
    ], at(60))
    assert len({c.incident.id for c in changes}) == 1
    inc = changes[0].incident
    assert inc.group == "node" and inc.key == "node|cluster=prod|node=n1"
    assert set(inc.signals) == {"xid", "metrics_missing", "node_cordoned"}
    assert inc.title == "Xid (code unknown) on n1 GPU 3"
    assert inc.severity == "critical" and inc.category == "hardware" and inc.xids == []


def test_severity_comes_from_the_label():
    inc = engine().ingest([unknown_xid(severity="warning")], at(0))[0].incident
    assert inc.severity == "warning" and inc.title.startswith("Xid (code unknown)")


def test_a_later_alert_naming_the_code_upgrades_the_incident():
    e = engine()
    inc = e.ingest([unknown_xid()], at(0))[0].incident
    later = alert("GPUXidError", node="n1", gpu="3", xid="48", UUID="GPU-n1-3", starts=20)
    assert e.ingest([later], at(20))[0].incident is inc
    assert inc.xids == [48] and inc.title.startswith("Xid 48: ") and inc.primary.xid == 48


def test_a_lower_severity_code_still_names_the_incident():
    """The code-unknown alert said critical; the catalog says what Xid 13 is. The code wins."""
    e = engine()
    inc = e.ingest([unknown_xid()], at(0))[0].incident
    e.ingest([alert("GPUXidError", node="n1", gpu="3", xid="13", UUID="GPU-n1-3", starts=5)], at(5))
    assert inc.primary.xid == 13 and inc.title.startswith("Xid 13: ")


def test_the_same_alert_naming_its_code_later_upgrades_its_member():
    e = engine()
    first = unknown_xid()
    inc = e.ingest([first], at(0))[0].incident
    again = unknown_xid(summary="GPU 3 reported Xid 79")
    assert again.fingerprint == first.fingerprint  # annotations are not part of the identity
    changes = e.ingest([again], at(30))
    assert "classification_upgraded" in changes[0].kinds
    assert inc.xids == [79] and inc.title.startswith("Xid 79: GPU has fallen off the bus on n1")


def test_the_kernel_log_upgrades_a_code_unknown_xid():
    e = engine()
    inc = e.ingest([unknown_xid()], at(0))[0].incident
    evidence = [EvidenceLine("NVRM: Xid (PCI:0000:5d:00): 79, GPU has fallen off the bus.", xid=79, pci="0000:5d:00")]
    signal = upgrade_signal(evidence, inc, e.rules.catalog, inc.gpus)
    assert signal is not None and signal.xid == 79
    changes = e.correlator.enrich(inc.id, at(40), "kernel log", {}, [signal])
    assert changes and "classification_upgraded" in changes[0].kinds
    assert inc.xids == [79] and inc.title.startswith("Xid 79: GPU has fallen off the bus on n1")
