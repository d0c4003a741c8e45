// `chattts-render fix` commands (the player and the QA page): the page writes them without --out; opened from a
// file, the output root is the folder holding this page's book folder, so every command gets `--out ROOT`
// (shell-quoted as Python's shlex.quote does).  Served over http(s) that folder is unknown: no --out.
const fixCommand = (() => {
  "use strict";
  const quote = (s) => (s !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\"'\"'")}'`);
  let root = null;
  if (location.protocol === "file:") {
    const parts = decodeURIComponent(location.pathname).split("/");
    parts.splice(-2);                  // the page's file name and its book folder
    root = parts.join("/") || "/";
  }
  return (command) => (root === null ? command : `${command} --out ${quote(root)}`);
})();
