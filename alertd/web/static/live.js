// Live updates of the incidents list: re-fetch the rows of the current filters every few seconds
// (server-rendered HTML fragment; no build step). Pauses while the tab is hidden or the box is unticked.
(function () {
  "use strict";
  var table = document.querySelector("table[data-live-src]");
  var box = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!table || !box) { if (box) { box.disabled = true; } return; }
  var body = document.getElementById("rows");
  var every = 5000, timer = null, last = body.innerHTML;
  function schedule() { clearTimeout(timer); if (box.checked) { timer = setTimeout(refresh, every); } }
  function refresh() {
    if (document.hidden) { schedule(); return; }
    fetch(table.getAttribute("data-live-src"), {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (html) {
        if (html !== last) {
          // Keep focus where it was when the row still exists after the update.
          var focused = document.activeElement && body.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
          body.innerHTML = html; last = html;
          status.textContent = "Updated " + new Date().toLocaleTimeString();
          if (focused) { var again = body.querySelector('a[href="' + focused + '"]'); if (again) { again.focus(); } }
        }
      })
      .catch(function (e) { status.textContent = "Live updates paused: " + e.message; })
      .then(schedule);
  }
  box.addEventListener("change", schedule);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
  schedule();
})();
