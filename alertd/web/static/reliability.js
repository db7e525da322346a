// Charts of the reliability page, from the report embedded as JSON (no inline script: CSP script-src 'self').
(function () {
  "use strict";
  function draw() {
    var el = document.getElementById("report-data");
    if (!el || typeof Chart === "undefined") { return; }
    var r = JSON.parse(el.textContent);
    var flat = { animation: false, responsive: true, maintainAspectRatio: false,
                 scales: { x: { beginAtZero: true }, y: { beginAtZero: true } } };
    var weeks = r.weekly.map(function (w) { return w.week; });
    var refs = r.references.map(function (ref, i) {
      return { type: "line", label: ref.name, data: weeks.map(function () { return ref.per1000GpuDays; }),
               borderDash: i ? [2, 4] : [6, 4], pointRadius: 0, borderWidth: 2, fill: false };
    });
    new Chart(document.getElementById("chart-weekly"), { type: "bar", options: flat, data: { labels: weeks,
      datasets: [{ label: "failures per 1,000 GPU-days", data: r.weekly.map(function (w) { return w.failuresPer1000GpuDays; }) }].concat(refs) } });
    new Chart(document.getElementById("chart-out"), { type: "bar", options: flat, data: {
      labels: r.daily.map(function (d) { return d.day; }),
      datasets: [{ label: "GPU-hours out of service", data: r.daily.map(function (d) { return d.gpuHoursOutOfService; }) }] } });
    new Chart(document.getElementById("chart-causes"), { type: "bar", options: flat, data: {
      labels: r.byCause.map(function (c) { return c.category + (c.xid ? " Xid " + c.xid : ""); }),
      datasets: [{ label: "failures", data: r.byCause.map(function (c) { return c.failures; }) }] } });
    var actions = Object.keys(r.mttrSeconds.byAction);
    function hours(key) { return actions.map(function (a) { var v = r.mttrSeconds.byAction[a][key]; return v === null ? null : v / 3600; }); }
    new Chart(document.getElementById("chart-mttr"), { type: "bar", options: flat, data: { labels: actions,
      datasets: [{ label: "median (h)", data: hours("median") }, { label: "p90 (h)", data: hours("p90") }] } });
    var types = {};
    r.cordoned.daily.forEach(function (d) { Object.keys(d.byNodeType).forEach(function (t) { types[t] = true; }); });
    new Chart(document.getElementById("chart-cordoned"), { type: "line", options: flat, data: {
      labels: r.cordoned.daily.map(function (d) { return d.day; }),
      datasets: Object.keys(types).map(function (t) {
        return { label: t, data: r.cordoned.daily.map(function (d) { return d.byNodeType[t] || 0; }), stepped: true };
      }) } });
    document.body.setAttribute("data-charts-ms", String(Math.round(performance.now())));
    document.body.setAttribute("data-charts", "drawn");
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
}());
