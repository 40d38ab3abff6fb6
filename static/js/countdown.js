// Countdowns: <span data-countdown="ISO time"> shows the time left ("3 h 12 min"), ticked down every 20 s.
// The server renders the same text first, so the page reads right without scripts; this keeps it right while
// the page stays open (also after htmx swaps in a section: every tick looks the elements up again).
(() => {
  const text = (seconds) => {
    if (seconds <= 0) return "due now";
    if (seconds < 60) return "less than a minute";
    let minutes = Math.floor(seconds / 60);
    const days = Math.floor(minutes / 1440);
    minutes -= days * 1440;
    const hours = Math.floor(minutes / 60);
    minutes -= hours * 60;
    const parts = days ? [`${days} d`] : [];
    if (days || hours) parts.push(`${hours} h`);
    if (!days) parts.push(`${minutes} min`);
    return parts.join(" ");
  };
  const tick = () => {
    for (const element of document.querySelectorAll("[data-countdown]")) {
      const at = Date.parse(element.dataset.countdown);
      if (!Number.isNaN(at)) element.textContent = text(Math.floor((at - Date.now()) / 1000));
    }
  };
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  setInterval(tick, 20000);
})();
