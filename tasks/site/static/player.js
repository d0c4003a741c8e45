// The book player (tasks/site/player.py writes the page): one <audio>, the chapter's text as sentence spans
// with their cue times (data-start, seconds on the chapter's timeline), the chapters' files in #player-data.
(() => {
  "use strict";
  const data = JSON.parse(document.getElementById("player-data").textContent);
  const audio = document.getElementById("audio");
  const text = document.getElementById("text");
  const buttons = Array.from(document.querySelectorAll("nav.chapters button"));
  const chapters = data.chapters.map((c, i) => {
    const article = text.querySelector(`article[data-chapter="${i}"]`);
    const spans = Array.from(article.querySelectorAll(".s"));
    return { ...c, article, spans, starts: spans.map((s) => parseFloat(s.dataset.start)) };
  });
  const calm = window.matchMedia("(prefers-reduced-motion: reduce)");
  let current = -1;        // the chapter shown
  let active = null;       // the highlighted sentence
  let pending = null;      // {time, play}: a seek waiting for a new file's metadata

  // The first of the book's formats this browser plays: the chapter's own file, else the M4B at an offset.
  function playable(files) {
    const fmt = data.formats.find((f) => files[f] && audio.canPlayType(data.types[f]) !== "");
    return fmt ? files[fmt] : null;
  }
  const whole = chapters.every((c) => playable(c.files) === null);    // no chapter file plays: the M4B does
  function source(i) {
    if (whole) return { src: playable(data.book), offset: chapters[i].offset };
    return { src: playable(chapters[i].files), offset: 0 };
  }
  const now = () => audio.currentTime - source(current).offset;   // seconds into the shown chapter

  function start() {
    const p = audio.play();
    if (p) p.catch(() => {});     // refused (no user gesture yet): the controls show it paused
  }
  function show(i) {
    if (i === current) return;
    if (current >= 0) {
      chapters[current].article.hidden = true;
      buttons[current].removeAttribute("aria-current");
    }
    current = i;
    chapters[i].article.hidden = false;
    buttons[i].setAttribute("aria-current", "true");
    highlight(null);
  }
  // Chapter i at `time` seconds into it; play when asked.  Before a file's metadata is in, the latest request
  // waits for it.
  function go(i, time, play) {
    const s = source(i);
    show(i);
    if (s.src === null) return;
    if (audio.getAttribute("src") !== s.src) audio.src = s.src;       // (readyState drops to HAVE_NOTHING)
    if (pending === null && audio.readyState >= 1) {
      audio.currentTime = s.offset + time;
      if (play) start();
    } else {
      pending = { time: s.offset + time, play };
    }
  }
  audio.addEventListener("loadedmetadata", () => {
    if (pending === null) return;
    const p = pending;
    pending = null;
    audio.currentTime = p.time;
    if (p.play) start();
  });

  // The sentence being spoken: the last one started (it stays lit through the pause after it).  Cue times are
  // whole milliseconds; half of one absorbs the float error of (M4B offset + start) - offset.
  const EPSILON_S = 0.0005;
  function sentenceAt(starts, t) {
    let lo = 0, hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] <= t + EPSILON_S) lo = mid + 1; else hi = mid;
    }
    return lo - 1;
  }
  function highlight(span) {
    if (span === active) return;
    if (active) active.classList.remove("active");
    active = span;
    if (span) {
      span.classList.add("active");
      span.scrollIntoView({ block: "center", behavior: calm.matches ? "auto" : "smooth" });
    }
  }
  function sync() {
    if (pending !== null || current < 0) return;
    if (whole) {                 // one file for the book: the text follows its chapters
      const t = audio.currentTime;
      const i = chapters.findIndex((c) => c.offset <= t && t < c.offset + c.seconds);
      if (i >= 0 && i !== current) show(i);
    }
    const c = chapters[current];
    const k = sentenceAt(c.starts, now());
    highlight(k >= 0 ? c.spans[k] : null);
    save();
  }
  audio.addEventListener("timeupdate", sync);
  audio.addEventListener("seeked", sync);
  audio.addEventListener("ended", () => {
    if (!whole && current + 1 < chapters.length) go(current + 1, 0, true);
  });

  text.addEventListener("click", (e) => {
    const flag = e.target.closest("button.flag");
    if (flag) { toggleFlag(flag.dataset.seg); return; }
    const span = e.target.closest(".s");
    if (span) go(current, parseFloat(span.dataset.start), true);
  });
  buttons.forEach((b, i) => b.addEventListener("click", () => go(i, 0, !audio.paused)));

  function step(d) {
    const c = chapters[current];
    const k = sentenceAt(c.starts, now()) + d;
    if (k >= 0 && k < c.starts.length) go(current, c.starts[k], !audio.paused);
    else if (k < 0 && current > 0) go(current - 1, chapters[current - 1].starts.at(-1) ?? 0, !audio.paused);
    else if (k >= c.starts.length && current + 1 < chapters.length) go(current + 1, 0, !audio.paused);
  }
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target === audio
        || e.target.closest("input, textarea, select, button.flag, #flags")) {
      return;                    // the audio controls, form fields and the flag buttons keep their own keys
    }
    if (e.key === " ") audio.paused ? start() : audio.pause();
    else if (e.key === "ArrowLeft") step(-1);
    else if (e.key === "ArrowRight") step(1);
    else return;
    e.preventDefault();
  });

  // The position, per book, across visits.
  function save() {
    try {
      localStorage.setItem(data.key, JSON.stringify({ chapter: current, time: now() }));
    } catch (err) { /* storage off (private mode): nothing is remembered */ }
  }
  function saved() {
    try {
      const s = JSON.parse(localStorage.getItem(data.key) || "null");
      if (s && Number.isInteger(s.chapter) && s.chapter >= 0 && s.chapter < chapters.length) return s;
    } catch (err) { /* unreadable: start at the beginning */ }
    return null;
  }
  // Segments flagged for a re-take, per book (a list of C.S names), with the fix command and the --from file.
  const fix = data.flags;
  const flagButtons = Array.from(text.querySelectorAll("button.flag"));
  const segText = new Map();     // C.S -> its sentences' text, in reading order
  text.querySelectorAll(".s[data-seg]").forEach((s) => {
    segText.set(s.dataset.seg, (segText.get(s.dataset.seg) || "") + s.textContent);
  });
  const bookOrder = (a, b) => {
    const [x, y] = [a, b].map((n) => n.split(".").map(Number));
    return x[0] - y[0] || x[1] - y[1];
  };
  function loadFlags() {
    try {
      const list = JSON.parse(localStorage.getItem(fix.key) || "[]");
      return Array.isArray(list) ? list.filter((n) => segText.has(n)) : [];    // (a segment no longer here: gone)
    } catch (err) { return []; }
  }
  const flags = new Set(loadFlags());
  let download = null;           // the list's object URL
  function flagged() { return Array.from(flags).sort(bookOrder); }
  function showFlags() {
    const names = flagged();
    flagButtons.forEach((b) => b.setAttribute("aria-pressed", String(flags.has(b.dataset.seg))));
    text.querySelectorAll(".s[data-seg]").forEach((s) => s.classList.toggle("flagged", flags.has(s.dataset.seg)));
    document.getElementById("flag-count").textContent = String(names.length);
    document.getElementById("flags-empty").hidden = names.length > 0;
    document.getElementById("flag-actions").hidden = names.length === 0;
    const list = document.getElementById("flag-list");
    list.replaceChildren(...names.map((n) => {
      const li = document.createElement("li");
      const name = document.createElement("span");
      name.className = "seg";
      name.textContent = n;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "unflag";
      remove.dataset.seg = n;
      remove.textContent = "remove";
      li.append(name, " ", segText.get(n).replace(/\s+/g, " "), " ", remove);
      return li;
    }));
    document.getElementById("fix-command").value =
      names.length ? fixCommand(`${fix.head} ${names.join(" ")} ${fix.option}`) : "";
    const a = document.getElementById("flags-download");
    if (download) URL.revokeObjectURL(download);
    const lines = [fix.title, `# ${fixCommand(fix.from)}`, ...names];
    const body = lines.map((l) => l + "\n").join("");
    download = URL.createObjectURL(new Blob([body], { type: "text/plain;charset=utf-8" }));
    a.href = download;
    a.download = fix.file;
  }
  function toggleFlag(name) {
    if (flags.has(name)) flags.delete(name); else flags.add(name);
    try {
      localStorage.setItem(fix.key, JSON.stringify(flagged()));
    } catch (err) { /* storage off: the flags last as long as the page */ }
    showFlags();
  }
  document.getElementById("flag-list").addEventListener("click", (e) => {
    const b = e.target.closest("button.unflag");
    if (b) toggleFlag(b.dataset.seg);
  });
  document.getElementById("flags-clear").addEventListener("click", () => {
    flagged().forEach((n) => toggleFlag(n));
  });
  document.getElementById("copy-fix").addEventListener("click", (e) => {
    const box = document.getElementById("fix-command");
    box.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(box.value).catch(() => {});
    } else {
      try { document.execCommand("copy"); } catch (err) { /* no clipboard: the field holds it */ }
    }
    e.target.textContent = "copied";
  });
  showFlags();

  if (chapters.length) {
    const s = saved();
    go(s ? s.chapter : 0, s ? Math.max(0, s.time) : 0, false);
  }
})();
