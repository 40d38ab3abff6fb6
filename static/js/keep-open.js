// A section swapped in anew by htmx (the ops overview's figures, every 15 s) keeps open the <details> a person
// opened: each such <details> has an id, and the new one with that id is opened again. htmx itself gives the
// focus back to the element with the focused one's id (the <summary>s have ids too).
(() => {
  let open = [];
  document.addEventListener("htmx:beforeSwap", () => {
    open = [...document.querySelectorAll("details[id][open]")].map((details) => details.id);
  });
  document.addEventListener("htmx:afterSwap", () => {
    for (const id of open) {
      const details = document.getElementById(id);
      if (details instanceof HTMLDetailsElement) details.open = true;
    }
    open = [];
  });
})();
