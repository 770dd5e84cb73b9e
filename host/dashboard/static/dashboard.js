// The dashboard page: one WebSocket, state in, controls out. No framework, no build step.
// Every text from the bus is set with textContent; only the timeline's step sections are
// HTML, rendered and escaped by the server with the report's own templates.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const tiles = new Map();   // serial -> {el, data}
  const screens = new Map(); // serial -> newest src
  let ws = null;
  let viewing = null;
  let refs = 0;
  let retry = 500;

  function token() {
    return new URLSearchParams(location.search).get("token") || "";
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const t = token();
    ws = new WebSocket(`${proto}//${location.host}/ws` + (t ? `?token=${encodeURIComponent(t)}` : ""));
    ws.onopen = () => {
      retry = 500;
      document.body.dataset.connected = "yes";
      $("conn").textContent = "live";
      send({type: "view", serial: viewing});
    };
    ws.onclose = () => {
      document.body.dataset.connected = "no";
      $("conn").textContent = "disconnected, retrying…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      const handler = handlers[msg.type];
      if (handler) handler(msg);
    };
  }

  function send(msg, quiet) {
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      if (!quiet) notice("not connected", true);
      return null;
    }
    msg.ref = String(++refs);
    ws.send(JSON.stringify(msg));
    return msg.ref;
  }

  function notice(text, bad) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice" + (bad ? " bad" : "");
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---- the fleet view ------------------------------------------------------------------

  function tileFor(serial) {
    let t = tiles.get(serial);
    if (t) return t;
    const root = el("article", "tile");
    root.dataset.serial = serial;
    root.dataset.hasScreen = "no";
    const img = el("img", "screen");
    img.alt = `screen of ${serial}`;
    img.addEventListener("load", () => { root.dataset.hasScreen = img.naturalWidth > 0 ? "yes" : "no"; });
    const head = el("h3", "serial", serial);
    const status = el("span", "status");
    const instruction = el("div", "line instruction");
    const step = el("div", "line step");
    const action = el("div", "line action");
    const thought = el("div", "line thought");
    const usage = el("div", "line usage muted");
    root.append(img, head, status, instruction, step, action, thought, usage);
    root.addEventListener("click", () => { location.hash = `#/phone/${encodeURIComponent(serial)}`; });
    t = {el: root, img, status, instruction, step, action, thought, usage, data: null};
    tiles.set(serial, t);
    const fleet = $("fleet");
    const after = [...tiles.keys()].sort().find((s) => s > serial);
    fleet.insertBefore(root, after ? tiles.get(after).el : null);
    const opt = el("option", "", serial);
    opt.value = serial;
    $("submit-target").append(opt);
    return t;
  }

  function drawTile(d) {
    const t = tileFor(d.serial);
    t.data = d;
    if (t.el.dataset.status !== d.status) {
      // the statuses this tile went through, in order (kept short)
      const seen = (t.el.dataset.seen || "").split(" ").filter(Boolean);
      seen.push(d.status);
      t.el.dataset.seen = seen.slice(-20).join(" ");
    }
    t.el.dataset.status = d.status;
    t.status.textContent = d.status + (d.waiting_for ? ` (${d.waiting_for})` : "");
    t.status.className = `status ${d.status}`;
    t.instruction.textContent = d.instruction || (d.last_outcome ? `last: ${d.last_outcome}` : "no episode yet");
    t.instruction.title = d.instruction;
    t.step.textContent = d.episode_id ? `step ${d.step}` : "";
    t.action.textContent = d.action ? `▶ ${d.action}` : "";
    // a phone that needs attention shows what to do about it (the preflight's fix)
    t.thought.textContent = d.question ? `asks: ${d.question}`
      : d.status === "attention" ? d.detail : d.thought;
    t.usage.textContent = d.tokens ? `${d.tokens} tokens · $${d.cost_usd.toFixed(4)}` : "";
    if (viewing === d.serial) drawPhoneHead(d);
  }

  function drawHeader(h) {
    $("n-phones").textContent = h.phones;
    for (const s of ["idle", "busy", "waiting", "attention", "offline"]) $(`n-${s}`).textContent = h.by_status[s];
    $("n-running").textContent = h.running;
    $("n-queued").textContent = h.queued;
    $("n-steps").textContent = h.steps_per_min;
    $("n-tokens").textContent = h.tokens_per_min;
    $("n-errors").textContent = h.errors_5min;
    const by = Object.entries(h.grounded_by || {});
    $("n-grounded").textContent = by.length ? by.map(([s, n]) => `${s} ${n}`).join(" · ") : "–";
    const hosts = $("hosts");
    hosts.replaceChildren(...h.hosts.map((x) => {
      const e = el("span", `host ${x.state}`, `${x.host}: ${x.state}`);
      e.title = `${x.devices} phones · ${x.version}`;
      return e;
    }));
  }

  // ---- the phone view ------------------------------------------------------------------

  function drawPhoneHead(d) {
    $("phone-serial").textContent = d.serial;
    const st = $("phone-status");
    st.textContent = d.status + (d.waiting_for ? ` (${d.waiting_for})` : "");
    st.className = `status ${d.status}`;
    $("phone-episode").textContent = d.episode_id ? `${d.episode_id} · step ${d.step}` : "";
    $("phone-instruction").textContent = d.instruction;
    $("approval").hidden = d.waiting_for !== "approval";
    $("approval-detail").textContent = d.detail;
    $("form-answer").hidden = d.waiting_for !== "question";
    $("question-text").textContent = d.question;
    $("btn-cancel").disabled = !(d.status === "busy" || d.status === "waiting");
  }

  function drawLists(msg) {
    $("phone-queue").replaceChildren(...msg.queue.map((q) =>
      el("li", "", (q.fleet ? "[fleet] " : "") + q.text)));
    $("phone-past").replaceChildren(...msg.past.map((p) => {
      const li = el("li", "", `${p.status} · ${p.steps} steps · ${p.instruction || p.episode_id}`);
      li.title = p.reason;
      li.dataset.status = p.status;
      return li;
    }));
  }

  function drawStep(n, html) {
    // html is the server's own template output (every value escaped there)
    const tl = $("timeline");
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const section = tpl.content.firstElementChild;
    if (!section) return;
    const old = tl.querySelector(`section.step[data-step="${n}"]`);
    if (old) { old.replaceWith(section); return; }
    const later = [...tl.querySelectorAll("section.step")].find((s) => Number(s.dataset.step) > n);
    tl.insertBefore(section, later || null);
  }

  const handlers = {
    tile: (m) => drawTile(m.tile),
    header: (m) => drawHeader(m.header),
    frame: (m) => {
      screens.set(m.serial, m.src);
      const t = tileFor(m.serial);
      t.img.src = m.src;
      t.el.dataset.frame = m.frame_id;
      if (viewing === m.serial) $("phone-screen").src = m.src;
    },
    phone: (m) => {
      if (m.serial !== viewing) return;
      drawPhoneHead(m.tile);
      drawLists(m);
      $("timeline").replaceChildren();
      for (const s of m.steps) drawStep(s.n, s.html);
      $("timeline").dataset.episode = m.episode ? m.episode.episode_id : "";
    },
    lists: (m) => { if (m.serial === viewing) drawLists(m); },
    step: (m) => {
      if (m.serial !== viewing) return;
      const tl = $("timeline");
      if (tl.dataset.episode !== m.episode_id) { tl.replaceChildren(); tl.dataset.episode = m.episode_id; }
      drawStep(m.n, m.html);
    },
    ack: (m) => {
      document.body.dataset.acks = String(Number(document.body.dataset.acks || 0) + 1);
      document.body.dataset.lastAck = m.ok ? `ok ${m.kind}` : "refused";
      notice(m.ok ? `${m.kind} sent${m.serial ? ` to ${m.serial}` : ""}` : `refused: ${m.detail}`, !m.ok);
    },
  };

  function route() {
    const m = location.hash.match(/^#\/phone\/(.+)$/);
    viewing = m ? decodeURIComponent(m[1]) : null;
    $("fleet").hidden = viewing !== null;
    $("phone").hidden = viewing === null;
    if (viewing !== null) {
      $("timeline").replaceChildren();
      $("phone-screen").src = screens.get(viewing) || "";
      const t = tiles.get(viewing);
      if (t && t.data) drawPhoneHead(t.data);
    }
    send({type: "view", serial: viewing}, true);
  }

  // ---- controls ----------------------------------------------------------------------

  $("submit").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("submit-text").value.trim();
    if (!text) return;
    const serial = viewing !== null && $("submit-target").value === "" ? "" : $("submit-target").value;
    if (send({type: "submit", serial, text})) $("submit-text").value = "";
  });
  $("btn-cancel").addEventListener("click", () => send({type: "cancel", serial: viewing}));
  $("btn-approve").addEventListener("click", () => send({type: "approve", serial: viewing, approved: true}));
  $("btn-deny").addEventListener("click", () => send({type: "approve", serial: viewing, approved: false}));
  $("form-steer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (send({type: "steer", serial: viewing, text: $("steer-text").value})) $("steer-text").value = "";
  });
  $("form-answer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (send({type: "answer", serial: viewing, text: $("answer-text").value})) $("answer-text").value = "";
  });

  window.addEventListener("hashchange", route);
  connect();
  route();
})();
