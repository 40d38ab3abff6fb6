// Copy buttons: <button data-copy="#id"> copies the text of the element it names.
// Loaded as a file (no inline script) so the Content-Security-Policy can forbid inline code.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected — press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});
