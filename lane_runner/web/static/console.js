// The console's live parts; every page reads without this script.
// - "change" events from /events: the page's <main> is fetched again and swapped in
//   (the server renders it; nothing here builds HTML from data).
// - a running task's log: lines from its /log/events appended as text.
"use strict";
(function () {
  const live = document.body.dataset.live;
  const dot = document.getElementById("live");
  function mark(on) { if (dot) { dot.classList.toggle("on", on); } }

  let fetching = false, again = false;
  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const response = await fetch(location.href, { headers: { "X-Console-Part": "main" }, credentials: "same-origin" });
      if (response.ok) {
        const main = document.getElementById("main");
        const active = document.activeElement;
        if (!(active && main.contains(active) && (active.tagName === "INPUT" || active.tagName === "SELECT"))) {
          main.innerHTML = await response.text();
          follow();
        }
      }
    } finally {
      fetching = false;
      if (again) { again = false; refresh(); }
    }
  }

  if (live && live !== "none" && window.EventSource) {
    const changes = new EventSource("/events");
    changes.onopen = function () { mark(true); };
    changes.onerror = function () { mark(false); };
    let first = true;
    changes.addEventListener("change", function () {
      if (first) { first = false; return; }  // the version at connect: the page is current
      refresh();
    });
    if (live === "runs") { setInterval(refresh, 2000); }
  }

  let followed = null;
  function follow() {
    const log = document.getElementById("log");
    const url = log && log.dataset.follow;
    if (!url || (followed && followed.url.endsWith(url))) { return; }
    if (followed) { followed.close(); }
    followed = new EventSource(url);
    followed.addEventListener("lines", function (event) {
      const box = document.getElementById("log");
      const end = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      for (const line of JSON.parse(event.data)) { box.append(document.createTextNode(line + "\n")); }
      if (end) { box.scrollTop = box.scrollHeight; }
    });
    followed.addEventListener("end", function () {
      followed.close();
      const state = document.getElementById("log-state");
      if (state) { state.textContent = "ended"; }
    });
  }
  follow();
})();
