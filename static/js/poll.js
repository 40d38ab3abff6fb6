// The rental page's poller (`rental_detail.html#poller`) backs off while nothing changes. htmx asks after
// `data-delay` seconds; a changed rental's answer swaps in a new poller (fast again, or none once final), while
// "nothing new" is a bodiless 204, after which this asks again 1.5 times later each time, up to 30 s.
document.addEventListener("htmx:afterRequest", (event) => {
  const poller = event.detail.elt;
  if (poller.id !== "poller" || event.detail.xhr.status !== 204 || !poller.isConnected) return;
  const delay = Math.min(Number(poller.dataset.delay) * 1.5, 30);
  poller.dataset.delay = String(delay);
  const url = poller.getAttribute("hx-get");
  setTimeout(() => htmx.ajax("GET", url, { source: poller, target: poller, swap: "outerHTML" }), delay * 1000);
});
