// Live updates: re-fetch the page's live part every few seconds (server-rendered HTML; no build step).
// The incidents list asks for its rows (a fragment); the incident page asks for itself and takes the element
// marked data-live-whole from the answer. Pauses while the tab is hidden or the box is unticked. A session that
// ended (logout elsewhere, token rotated, expiry) sends the browser to the login page, back here after it.
(function () {
  "use strict";
  var source = document.querySelector("[data-live-src]");
  var box = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!source || !box) { if (box) { box.disabled = true; } return; }
  var whole = source.hasAttribute("data-live-whole");
  // A whole page asks for itself as the browser has it: a signed link's parameters stay on (core/signed_links.py).
  var src = whole ? window.location.pathname + window.location.search : source.getAttribute("data-live-src");
  var body = whole ? source : document.getElementById("rows");
  var every = 5000, timer = null, last = body.innerHTML;
  function schedule() { clearTimeout(timer); if (box.checked) { timer = setTimeout(refresh, every); } }
  function toLogin() {
    window.location.assign("/ui/login?next=" + encodeURIComponent(window.location.pathname + window.location.search));
  }
  function signedOut(r) {
    return r.status === 401 || (r.redirected && new URL(r.url).pathname === "/ui/login");
  }
  function liveHtml(html) {
    if (!whole) { return html; }
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(source.id);
    if (!fresh) { throw new Error("the page changed shape"); }
    return fresh.innerHTML;
  }
  function refresh() {
    if (document.hidden) { schedule(); return; }
    fetch(src, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) {
        if (signedOut(r)) { toLogin(); throw new Error("signed out"); }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        html = liveHtml(html);
        if (html !== last) {
          // Keep focus where it was when the link still exists after the update.
          var focused = document.activeElement && body.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
          // Fleet rows opened by the reader stay open.
          var opened = Array.prototype.map.call(body.querySelectorAll("details[open][data-fleet]"),
                                                function (d) { return d.getAttribute("data-fleet"); });
          body.innerHTML = html; last = body.innerHTML;
          opened.forEach(function (id) {
            var again = body.querySelector('details[data-fleet="' + CSS.escape(id) + '"]'); if (again) { again.open = true; }
          });
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
