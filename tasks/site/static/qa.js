// The QA page (tasks/site/qa.py writes it): each `fix` command gets --out (fix.js); its copy button puts the
// command in the #clipboard field and, where the browser allows it (a secure context), on the clipboard.
(() => {
  "use strict";
  const box = document.getElementById("clipboard");
  document.querySelectorAll("code.cmd[data-fix]").forEach((c) => { c.textContent = fixCommand(c.dataset.fix); });
  document.querySelectorAll("button.copy[data-fix]").forEach((b) => {
    b.addEventListener("click", () => {
      box.value = fixCommand(b.dataset.fix);
      box.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(box.value).catch(() => {});
      } else {
        try { document.execCommand("copy"); } catch (err) { /* no clipboard: the field holds it */ }
      }
      document.querySelectorAll("button.copy").forEach((o) => { o.textContent = "copy"; });
      b.textContent = "copied";
    });
  });
})();
