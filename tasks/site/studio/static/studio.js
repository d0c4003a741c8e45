// The studio's pages (tasks/site/studio/templates): the library (upload, the books folder, the queue), a book
// (voices, the render options form), its render (live progress over server-sent events, chapters to play as they
// finish).  Everything the server sends is put in the page as text (textContent), never as markup.
(() => {
  "use strict";
  const page = document.body.dataset.page;
  const data = JSON.parse(document.getElementById("studio-data").textContent || "{}");
  const $ = (id) => document.getElementById(id);
  const bookId = data.book || null;
  const bookApi = bookId ? `/api/books/${encodeURIComponent(bookId)}` : null;

  async function api(path, body, method) {
    const r = await fetch(path, {
      method: method || "POST", credentials: "same-origin",
      headers: body instanceof Blob ? { "content-type": "application/octet-stream" } : { "content-type": "application/json" },
      body: body instanceof Blob ? body : JSON.stringify(body || {}),
    });
    let got = {};
    try { got = await r.json(); } catch (e) { got = { error: `${r.status} ${r.statusText}` }; }
    return { ok: r.ok, status: r.status, data: got };
  }
  const el = (tag, props, ...kids) => {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    e.append(...kids.filter((k) => k !== null && k !== undefined));
    return e;
  };
  const hms = (s) => {
    s = Math.round(s || 0);
    const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, x = String(s % 60).padStart(2, "0");
    return h ? `${h}:${String(m).padStart(2, "0")}:${x}` : `${m}:${x}`;
  };

  // ------------------------------------------------------------------------------------------- the queue
  const jobHooks = [];
  function showJobs(jobs) {
    const table = $("jobs");
    if (!table) return;
    const mine = page === "library" ? jobs : jobs.filter((j) => j.book === bookId);
    const body = table.tBodies[0];
    body.replaceChildren(...mine.slice().reverse().map((j) => {
      const actions = el("td", { className: "actions" });
      const act = (label, what) => {
        const b = el("button", { type: "button", textContent: label, className: `job-${what}` });
        b.addEventListener("click", async () => { await api(`/api/jobs/${encodeURIComponent(j.id)}/${what}`); });
        actions.append(b, " ");
      };
      if (j.state === "running" && j.kind === "render") act("pause", "pause");
      if (j.state === "paused") act("resume", "resume");
      if (["queued", "running", "paused"].includes(j.state)) act("cancel", "cancel");
      const tr = el("tr", {}, el("td", { textContent: j.id }), el("td", { textContent: j.book }),
        el("td", { textContent: `${j.kind}: ${j.title}` }),
        el("td", { className: `state state-${j.state}`, textContent: j.state }),
        el("td", { className: "message", textContent: j.message || "" }), actions);
      tr.dataset.job = j.id;
      tr.dataset.state = j.state;
      return tr;
    }));
    if ($("jobs-empty")) $("jobs-empty").hidden = mine.length > 0;
  }
  function listen(onData) {
    const src = new EventSource(`/api/events${bookId ? `?book=${encodeURIComponent(bookId)}` : ""}`);
    src.onmessage = (e) => {
      const d = JSON.parse(e.data);
      showJobs(d.jobs);
      jobHooks.forEach((f) => f(d.jobs));
      if (onData) onData(d);
      $("live").textContent = "live";
    };
    src.onerror = () => { $("live").textContent = "reconnecting…"; };
    return src;
  }
  function whenJobEnds(id, then) {
    const hook = (jobs) => {
      const j = jobs.find((x) => x.id === id);
      if (j && !["queued", "running", "paused"].includes(j.state)) {
        jobHooks.splice(jobHooks.indexOf(hook), 1);
        then(j);
      }
    };
    jobHooks.push(hook);
  }

  // ---------------------------------------------------------------------------------------- the library
  function library() {
    const drop = $("drop"), input = $("file"), status = $("upload-status"), error = $("upload-error");
    async function upload(file) {
      error.textContent = "";
      status.textContent = `Reading ${file.name}…`;
      const r = await api(`/api/upload?name=${encodeURIComponent(file.name)}`, file);
      if (r.ok) { status.textContent = "Added."; location.href = r.data.url; return; }
      status.textContent = "";
      error.textContent = r.data.error || `refused (${r.status})`;
    }
    input.addEventListener("change", () => { if (input.files.length) upload(input.files[0]); });
    ["dragenter", "dragover"].forEach((t) => drop.addEventListener(t, (e) => {
      e.preventDefault(); drop.classList.add("over");
    }));
    ["dragleave", "drop"].forEach((t) => drop.addEventListener(t, () => drop.classList.remove("over")));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      if (e.dataTransfer.files.length) upload(e.dataTransfer.files[0]);
    });
    document.querySelectorAll("button.add-book").forEach((b) => b.addEventListener("click", async () => {
      error.textContent = "";
      status.textContent = `Reading ${b.dataset.name}…`;
      const r = await api("/api/add", { name: b.dataset.name });
      if (r.ok) { location.href = r.data.url; return; }
      status.textContent = "";
      error.textContent = r.data.error || `refused (${r.status})`;
    }));
    listen();
  }

  // ----------------------------------------------------------------------------------------------- a book
  function formValues(form) {
    const values = {};
    form.querySelectorAll("input[name], select[name]").forEach((f) => {
      values[f.name] = f.type === "checkbox" ? f.checked : f.value;
    });
    return values;
  }
  function showErrors(form, errors) {
    form.querySelectorAll("[data-error-for]").forEach((p) => { p.textContent = errors[p.dataset.errorFor] || ""; });
    form.querySelectorAll(".field").forEach((f) => f.classList.toggle("invalid", Boolean(errors[f.dataset.field])));
    const first = form.querySelector(".field.invalid");
    if (first) first.scrollIntoView({ block: "center" });
  }
  function book() {
    const form = $("render-form"), voiceField = form.querySelector("[name=voice]");
    const vstatus = $("voices-status"), list = $("candidates");
    function useVoice(spec) {
      voiceField.value = spec;
      list.querySelectorAll("li").forEach((li) => li.classList.toggle("chosen", li.dataset.spec === spec));
      vstatus.textContent = `Voice ${spec} picked for the render.`;
    }
    function showCandidates(info) {
      list.replaceChildren(...(info.candidates || []).map((c) => {
        const use = el("button", { type: "button", className: "use", textContent: "use this voice" });
        use.addEventListener("click", () => useVoice(c.spec));
        const name = el("input", { className: "save-name", placeholder: "name", size: 10 });
        const save = el("button", { type: "button", className: "save", textContent: "save as" });
        save.addEventListener("click", async () => {
          const r = await api("/api/voices/save", { name: name.value, spec: c.spec });
          vstatus.textContent = r.ok ? `Saved as ${r.data.saved}: --voice ${r.data.saved}` : (r.data.error || "refused");
        });
        const li = el("li", {}, el("span", { className: "name", textContent: c.name }), " ",
          el("audio", { controls: true, preload: "metadata", src: c.url }), " ",
          el("span", { className: "muted", textContent: `${(c.duration_s || 0).toFixed(1)} s${c.guard ? " (guard)" : ""}` }),
          " ", use, " ", name, save);
        li.dataset.spec = c.spec;
        if (voiceField.value === c.spec) li.classList.add("chosen");
        return li;
      }));
    }
    if (data.voices && data.voices.candidates) showCandidates(data.voices);
    document.querySelectorAll("button.use-voice").forEach((b) => b.addEventListener("click", () => useVoice(b.dataset.spec)));
    $("hear-voices").addEventListener("click", async () => {
      vstatus.textContent = "Queued: the candidates render when the engine is free…";
      const r = await api(`${bookApi}/voices`, { count: $("voice-count").value, from_seed: $("voice-from").value,
        values: formValues(form) });
      if (!r.ok) { vstatus.textContent = r.data.error || "refused"; if (r.data.errors) showErrors(form, r.data.errors); return; }
      whenJobEnds(r.data.job.id, async (j) => {
        if (j.state !== "done") { vstatus.textContent = `The audition ${j.state}: ${j.message}`; return; }
        const v = await fetch(`${bookApi}/voices`, { credentials: "same-origin" });
        showCandidates(await v.json());
        vstatus.textContent = "Listen and pick one.";
      });
    });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      showErrors(form, {});
      const r = await api(`${bookApi}/render`, { values: formValues(form) });
      if (r.ok) { location.href = r.data.url; return; }
      showErrors(form, r.data.errors || { _form: r.data.error || `refused (${r.status})` });
    });
    document.querySelectorAll("button.reinspect").forEach((b) => b.addEventListener("click", async () => {
      $("reinspect-status").textContent = "Reading…";
      const r = await api(`${bookApi}/inspect`, { values: formValues(form) });
      if (r.ok) { location.reload(); return; }
      $("reinspect-status").textContent = "";
      showErrors(form, r.data.errors || { _form: r.data.error || "refused" });
    }));
    listen();
  }

  // --------------------------------------------------------------------------------------------- a render
  function render() {
    const audio = $("listen"), text = $("listen-text");
    let playing = null, cues = [], spans = [], renderJob = null;
    async function play(number) {
      const r = await fetch(`/books/${encodeURIComponent(bookId)}/preview/${number}.json`, { credentials: "same-origin" });
      if (!r.ok) return;
      cues = (await r.json()).cues;
      spans = cues.map((c) => el("span", { className: "cue", textContent: c.text }));
      spans.forEach((s, i) => s.addEventListener("click", () => { audio.currentTime = cues[i].start; audio.play(); }));
      text.replaceChildren(...spans);
      playing = number;
      const li = document.querySelector(`#render-chapters li[data-chapter="${number}"]`);
      $("listen-what").textContent = `Chapter ${number}: ${li ? li.querySelector(".chapter-title").textContent : ""}`;
      audio.src = `/books/${encodeURIComponent(bookId)}/preview/${number}.wav?t=${Date.now()}`;
      audio.dataset.chapter = String(number);
      const p = audio.play();
      if (p) p.catch(() => {});
    }
    audio.addEventListener("timeupdate", () => {
      const t = audio.currentTime;
      spans.forEach((s, i) => s.classList.toggle("active", cues[i].start <= t && t < cues[i].end));
    });
    audio.addEventListener("ended", () => {
      const next = document.querySelector(`#render-chapters li[data-chapter="${playing + 1}"].playable`);
      if (next) play(playing + 1);
    });
    $("render-chapters").addEventListener("click", (e) => {
      const b = e.target.closest("button.play");
      if (b && !b.disabled) play(Number(b.closest("li").dataset.chapter));
    });
    function showProgress(d) {
      const p = d.progress;
      if (!p) return;
      $("book-status").textContent = p.done === p.total ? (p.packaged ? "done" : "rendered; packaging")
        : `${p.percent} %${p.rendering ? ", rendering now" : (renderJob ? `, ${renderJob.state}` : ", resumable")}`;
      $("overall").max = p.total;
      $("overall").value = p.done;
      $("numbers").textContent = `${p.done} of ${p.total} segments · ${hms(p.done_s)} of audio rendered` +
        (p.failed ? ` · ${p.failed} failed` : "") + (p.rendering ? " · rendering now" : "");
      const s = d.speed || {};
      $("speed").textContent = s.segments_per_min ? `${s.segments_per_min} segments a minute · ` +
        `${s.audio_per_wall}× real time · about ${hms(s.eta_s)} left` : "";
      const ol = $("render-chapters");
      p.chapters.forEach((c) => {
        let li = ol.querySelector(`li[data-chapter="${c.number}"]`);
        if (!li) {
          li = el("li", {}, el("button", { type: "button", className: "play", textContent: "▶" }), " ",
            el("span", { className: "chapter-title", textContent: c.title }), " ", el("progress", {}), " ",
            el("span", { className: "count" }));
          li.dataset.chapter = String(c.number);
          ol.append(li);
        }
        li.querySelector("progress").max = c.total;
        li.querySelector("progress").value = c.done;
        li.querySelector(".count").textContent = `${c.done}/${c.total}`;
        li.querySelector("button.play").disabled = !c.playable;
        li.classList.toggle("playable", c.playable);
      });
      if (p.packaged && d.files && d.files.length) {
        $("files").replaceChildren(...d.files.map((f) => {
          const a = el("a", { href: `/books/${encodeURIComponent(bookId)}/files/${encodeURIComponent(f.file)}?download=1`,
            textContent: f.file });
          a.setAttribute("download", "");
          a.dataset.format = f.format;
          return el("li", {}, a, " ", el("span", { className: "muted", textContent: f.format }));
        }));
        $("files-section").hidden = false;
      }
    }
    function showControls(jobs) {
      const mine = jobs.filter((j) => j.book === bookId && j.kind === "render");
      renderJob = mine.find((j) => ["queued", "running", "paused"].includes(j.state)) || null;
      $("pause").hidden = !(renderJob && renderJob.state === "running");
      $("resume-job").hidden = !(renderJob && renderJob.state === "paused");
      $("cancel").hidden = !renderJob;
      const last = mine[mine.length - 1];
      $("job-state").textContent = renderJob ? `render ${renderJob.state}` : (last ? `last render ${last.state}` : "");
      $("render-error").textContent = last && last.state === "failed" ? last.message : "";
    }
    let lastDone = -1;
    listen((d) => {
      showControls(d.jobs);
      showProgress(d);
      const p = d.progress;
      $("resume-book").hidden = Boolean(renderJob) || !p || p.rendering || p.done === p.total;
      if (p && p.packaged && renderJob === null && lastDone !== p.done && !$("player-link") && p.done === p.total) {
        lastDone = p.done;
        const a = el("a", { href: `/books/${encodeURIComponent(bookId)}/files/index.html`, textContent: "player", id: "player-link" });
        document.querySelector("header.bar nav").append(" · ", a);
      }
    });
    const job = (what) => async () => { if (renderJob) await api(`/api/jobs/${encodeURIComponent(renderJob.id)}/${what}`); };
    $("pause").addEventListener("click", job("pause"));
    $("resume-job").addEventListener("click", job("resume"));
    $("cancel").addEventListener("click", job("cancel"));
    $("resume-book").addEventListener("click", async () => {
      const r = await api(`${bookApi}/resume`);
      $("render-error").textContent = r.ok ? "" : (r.data.error || Object.values(r.data.errors || {}).join("; "));
      if (r.ok) $("resume-book").hidden = true;
    });
  }

  if (page === "library") library();
  else if (page === "book") book();
  else if (page === "render") render();
})();
