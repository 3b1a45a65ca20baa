// toolhost console: live parts, countdowns and copy buttons. Served from the
// host itself; the page runs no other script and no inline script.
"use strict";

(function () {
  const serverNow = Number(document.body.dataset.now || 0);
  const loadedAt = Date.now();
  const now = () => (serverNow ? serverNow + Math.floor((Date.now() - loadedAt) / 1000) : Math.floor(Date.now() / 1000));

  function span(seconds) {
    const s = Math.abs(seconds);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const text = (h ? h + "h " : "") + (h || m ? m + "m " : "") + r + "s";
    return seconds >= 0 ? "in " + text : text + " ago";
  }

  function tick() {
    for (const el of document.querySelectorAll(".countdown[data-at]")) {
      el.textContent = span(Number(el.dataset.at) - now());
    }
  }

  // Replaces a live part with the fresh fragment the server renders
  // (escaped there, like every page).
  async function refresh(el, url) {
    // Never wipe what a person is typing or pointing at.
    const busy = el.contains(document.activeElement) ||
      Array.from(el.querySelectorAll("textarea")).some((t) => t.value);
    if (busy) return;
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } });
      if (response.ok) {
        el.innerHTML = await response.text();
        tick();
      }
    } catch (_) { /* the next event tries again */ }
  }

  function listen() {
    if (!window.EventSource) return;
    const source = new EventSource("/events");
    source.addEventListener("approvals", (event) => {
      const count = Number(event.data);
      const badge = document.getElementById("pending-count");
      if (badge) badge.textContent = count > 0 ? String(count) : "";
      for (const el of document.querySelectorAll("[data-live-count]")) el.textContent = "(" + count + ")";
      for (const el of document.querySelectorAll("[data-live]")) refresh(el, el.dataset.live);
    });
  }

  function copyButtons() {
    for (const button of document.querySelectorAll("button[data-copy]")) {
      button.addEventListener("click", async () => {
        const source = document.getElementById(button.dataset.copy);
        if (!source) return;
        const text = source.textContent;
        try {
          await navigator.clipboard.writeText(text);
        } catch (_) {
          const range = document.createRange();
          range.selectNodeContents(source);
          const selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          document.execCommand("copy");
        }
        const label = button.textContent;
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = label; }, 1500);
      });
    }
  }

  function tail() {
    const box = document.getElementById("live-tail");
    const records = document.getElementById("records");
    if (!box || !records) return;
    let timer = null, running = false;
    // One refresh at a time: reading back a long trail for a filter that
    // matches little can take longer than the interval, and piling the
    // reads up would only load the host.
    const step = async () => {
      if (running) return;
      running = true;
      try { await refresh(records, box.dataset.tail); } finally { running = false; }
    };
    box.addEventListener("change", () => {
      if (timer) { clearInterval(timer); timer = null; }
      if (box.checked) timer = setInterval(step, 2000);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    tick();
    setInterval(tick, 1000);
    copyButtons();
    tail();
    if (document.getElementById("pending-count")) listen();
  });
})();
