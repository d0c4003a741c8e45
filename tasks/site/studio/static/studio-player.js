// The studio's fix panel in a book's player (tasks/site/player.py's page, served by the studio): the sentences
// flagged in the player (its ⚑ list, kept in localStorage) and those the checks flagged, each with a new take, an
// earlier take, another text or another seed — a `chattts-render fix` job; when it is done the page reloads (the
// player keeps its place) and plays the re-packaged chapter.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const studio = JSON.parse($("studio-data").textContent);
  const player = JSON.parse($("player-data").textContent);
  const list = $("studio-fix-list"), status = $("studio-fix-status"), error = $("studio-fix-error");
  $("studio-render-link").href = studio.render;
  const el = (tag, props, ...kids) => {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    e.append(...kids.filter((k) => k !== null && k !== undefined));
    return e;
  };
  const segText = new Map();
  document.querySelectorAll("#text .s[data-seg]").forEach((s) => {
    segText.set(s.dataset.seg, (segText.get(s.dataset.seg) || "") + s.textContent);
  });
  const checks = new Map(studio.flagged.map((f) => [f.name, f]));
  const order = (a, b) => {
    const [x, y] = [a, b].map((n) => n.split(".").map(Number));
    return x[0] - y[0] || x[1] - y[1];
  };
  function yours() {
    try {
      const l = JSON.parse(localStorage.getItem(player.flags.key) || "[]");
      return Array.isArray(l) ? l.filter((n) => segText.has(n)) : [];
    } catch (e) { return []; }
  }

  let busy = false;
  async function fix(body) {
    if (busy) return;
    error.textContent = "";
    const r = await fetch(`${studio.api}/fix`, {
      method: "POST", credentials: "same-origin", headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const got = await r.json().catch(() => ({}));
    if (!r.ok) { error.textContent = got.error || `refused (${r.status})`; return; }
    follow(got.job);
  }
  function follow(job) {
    busy = true;
    status.textContent = `${job.title}: ${job.state}…`;
    list.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    const src = new EventSource(`/api/events?book=${encodeURIComponent(studio.book)}`);
    src.onmessage = (e) => {
      const j = JSON.parse(e.data).jobs.find((x) => x.id === job.id);
      if (!j) return;
      status.textContent = `${j.title}: ${j.state}${j.message ? ` (${j.message})` : ""}`;
      if (["queued", "running", "paused"].includes(j.state)) return;
      src.close();
      busy = false;
      if (j.state === "done") { sessionStorage.setItem("studio-fixed", j.title); location.reload(); return; }
      error.textContent = `${j.title}: ${j.state}: ${j.message}`;
      list.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    };
  }
  async function showTakes(name) {
    const r = await fetch(`${studio.api}/takes?segment=${encodeURIComponent(name)}`, { credentials: "same-origin" });
    const got = await r.json();
    if (!r.ok) { error.textContent = got.error || "refused"; return; }
    $("studio-takes-of").textContent = name;
    $("studio-takes-list").replaceChildren(...got.takes.map((t) => {
      const keep = el("button", { type: "button", className: "keep-take", textContent: `keep take ${t.take}` });
      keep.disabled = t.take === got.kept;
      keep.addEventListener("click", () => fix({ segments: [name], action: "take", take: t.take }));
      return el("li", {}, el("audio", { controls: true, preload: "none", src: t.audio }), " ",
        el("span", { textContent: `take ${t.take}${t.take === got.kept ? " (kept)" : ""} · seed ${t.seed}` +
          (t.verdict ? ` · ${t.verdict}` : "") }), " ", keep);
    }));
    $("studio-takes").hidden = false;
  }
  function rebuild() {
    const mine = new Set(yours());
    const names = Array.from(new Set([...mine, ...checks.keys()])).sort(order);
    list.replaceChildren(...names.map((name) => {
      const button = (label, cls, then) => {
        const b = el("button", { type: "button", className: cls, textContent: label });
        b.disabled = busy;
        b.addEventListener("click", then);
        return b;
      };
      const text = el("input", { className: "fix-text", value: (segText.get(name) || "").trim(), size: 24 });
      const seed = el("input", { className: "fix-seed", type: "number", placeholder: "seed", size: 8 });
      const li = el("li", {}, el("span", { className: "seg", textContent: name }), " ",
        el("span", { className: "said", textContent: (segText.get(name) || "").replace(/\s+/g, " ") }), " ",
        el("span", { className: "keys", textContent: [mine.has(name) ? "flagged by you" : "",
          checks.has(name) ? "flagged by the checks" : ""].filter(Boolean).join(", ") }), el("br"),
        button("new take", "retake", () => fix({ segments: [name], action: "retake" })), " ",
        button("takes…", "takes", () => showTakes(name)), " ", text,
        button("say this", "say", () => fix({ segments: [name], action: "text", text: text.value })), " ", seed,
        button("use seed", "reseed", () => fix({ segments: [name], action: "seed", seed: seed.value })));
      li.dataset.seg = name;
      return li;
    }));
    if (!names.length) list.append(el("li", { className: "keys", textContent: "Nothing flagged yet: ⚑ after a sentence." }));
  }
  new MutationObserver(rebuild).observe($("flag-list"), { childList: true });
  rebuild();
  const fixed = sessionStorage.getItem("studio-fixed");
  if (fixed) { status.textContent = `${fixed}: done; the chapter was packaged again.`; sessionStorage.removeItem("studio-fixed"); }
  if (studio.job) follow(studio.job);
})();
