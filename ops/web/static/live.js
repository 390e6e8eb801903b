// openbell live pages: when a slot finishes, swap in the page's fresh <main> without a reload.
//
// The body names a cheap stamp endpoint (data-stamp-url) and the stamp the page was rendered at
// (data-stamp). Every data-poll-ms milliseconds the stamp is fetched; when it differs, the page
// itself is fetched again and its <main id="main"> replaces the current one. A parsed document's
// scripts never run, and the server escapes every text an agent wrote, so the swap adds no
// script. data-refreshes counts the swaps (the browser tests wait on it).
(function () {
  "use strict";
  var body = document.body;
  var stampUrl = body.getAttribute("data-stamp-url");
  var period = Number(body.getAttribute("data-poll-ms")) || 5000;
  var busy = false;
  if (!stampUrl || !window.fetch || !window.DOMParser) {
    return;
  }

  function text(response) {
    if (!response.ok) {
      throw new Error("HTTP " + response.status);
    }
    return response.text();
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
    var current = document.getElementById("main");
    if (fresh && current) {
      current.replaceWith(document.adoptNode(fresh));
      body.setAttribute("data-refreshes", String(Number(body.getAttribute("data-refreshes") || 0) + 1));
    }
  }

  function poll() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(stampUrl, { cache: "no-store" })
      .then(text)
      .then(function (stamp) {
        stamp = stamp.trim();
        if (stamp === body.getAttribute("data-stamp")) {
          return null;
        }
        return fetch(window.location.href, { cache: "no-store" })
          .then(text)
          .then(function (html) {
            swap(html);
            body.setAttribute("data-stamp", stamp);
          });
      })
      .catch(function () {
        // The server is restarting or gone: try again at the next tick.
      })
      .then(function () {
        busy = false;
      });
  }

  window.setInterval(poll, period);
})();
