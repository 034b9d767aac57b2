// Shiftlab's annotation pages (issue 31), loaded as a file: the pages' Content-Security-Policy
// allows no inline script. Two small helpers, both optional (the pages work without them):
// - [data-picker]: a filter box over a list of annotator checkboxes;
// - [data-progress-url]: polls a job's JSON every 1.5 s into an aria-live line, and reloads the
//   page once when the job has ended (never on a timer while nothing changed). A JSON endpoint
//   rather than static/live.js's page refetch: the baseline page builds its report on every GET.
//   It stops where polling cannot help: no job ("none"), or a refusal (4xx: signed out, no access).
"use strict";

document.querySelectorAll("[data-picker]").forEach((picker) => {
  const box = picker.querySelector("[data-picker-filter]");
  if (!box) return;
  box.closest(".picker-filter").hidden = false;
  box.addEventListener("input", () => {
    const wanted = box.value.trim().toLowerCase();
    picker.querySelectorAll("li").forEach((row) => {
      row.hidden = wanted !== "" && !row.textContent.toLowerCase().includes(wanted);
    });
  });
});

document.querySelectorAll("[data-progress-url]").forEach((line) => {
  const url = line.dataset.progressUrl;
  const bar = line.parentElement.querySelector("progress");
  const poll = () => {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : Promise.reject(response.status)))
      .then((job) => {
        if (job.status === "none") return;
        line.textContent = job.text || "";
        if (bar && job.total) {
          bar.max = job.total;
          bar.value = job.done;
        }
        if (job.finished) {
          window.location.reload();
        } else {
          window.setTimeout(poll, 1500);
        }
      })
      .catch((status) => {
        if (typeof status === "number" && status >= 400 && status < 500) {
          line.textContent = "Progress is not available here any more: reload the page.";
        } else {
          window.setTimeout(poll, 5000); // a network error or a server error: try again later
        }
      });
  };
  window.setTimeout(poll, 1500);
});
