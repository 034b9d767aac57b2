// Live pages (issue 31): a page that shows unfinished work carries
// <meta name="shiftlab-poll" content="SECONDS">. This script fetches the page again every SECONDS
// and swaps in the new content of each element marked data-live (matched by id), so progress shows
// without reloading the page (a full-page refresh loses the reader's place and focus). It stops when
// the fresh page no longer carries the meta element: the work has finished.
// SPDX-License-Identifier: GPL-3.0-or-later
(function () {
  "use strict";
  var marker = document.querySelector('meta[name="shiftlab-poll"]');
  if (!marker || !window.fetch || !window.DOMParser) {
    return;
  }
  var seconds = Math.max(1, Number(marker.getAttribute("content")) || 2);

  function swap(fresh) {
    document.querySelectorAll("[data-live]").forEach(function (region) {
      var next = fresh.getElementById(region.id);
      if (next && next.innerHTML !== region.innerHTML) {
        region.innerHTML = next.innerHTML;
        region.className = next.className;
      }
    });
  }

  function poll() {
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Shiftlab-Live": "1" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("status " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        swap(fresh);
        if (fresh.querySelector('meta[name="shiftlab-poll"]')) {
          window.setTimeout(poll, seconds * 1000);
        } else {
          document.documentElement.setAttribute("data-live-finished", "");
        }
      })
      .catch(function () {
        window.setTimeout(poll, seconds * 2000); // the server is busy or restarting: try again later
      });
  }

  window.setTimeout(poll, seconds * 1000);
})();
