// The QA page (tasks/site/qa.py writes it): each `fix` command's copy button puts the command in the #clipboard
// field and, where the browser allows it (a secure context), on the clipboard.
(() => {
  "use strict";
  const box = document.getElementById("clipboard");
  document.querySelectorAll("button.copy").forEach((b) => {
    b.addEventListener("click", () => {
      box.value = b.dataset.command;
      box.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(b.dataset.command).catch(() => {});
      } else {
        try { document.execCommand("copy"); } catch (err) { /* no clipboard: the field holds it */ }
      }
      document.querySelectorAll("button.copy").forEach((o) => { o.textContent = "copy"; });
      b.textContent = "copied";
    });
  });
})();
