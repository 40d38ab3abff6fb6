// A polled progress section is rendered once per rental version and shared by everyone polling it, so its
// forms carry no CSRF field: when such a form is submitted, add this page's token (from <meta name="csrf-token">).
// Loaded as a file (no inline script) so the Content-Security-Policy can forbid inline code.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method.toLowerCase() !== "post") return;
  if (form.querySelector('input[name="csrfmiddlewaretoken"]')) return;
  const token = document.querySelector('meta[name="csrf-token"]');
  if (!token) return;
  const field = document.createElement("input");
  field.type = "hidden";
  field.name = "csrfmiddlewaretoken";
  field.value = token.content;
  form.appendChild(field);
}, true);
