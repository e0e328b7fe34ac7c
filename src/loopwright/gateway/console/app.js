// The loopwright console: one WebSocket for RPC and events, no build step, no dependencies.
// Everything from the server is inserted as text (never as HTML).

const $ = (id) => document.getElementById(id);
const state = {
  ws: null, nextId: 1, pending: new Map(), token: sessionStorage.getItem("loopwright-token") || "",
  agents: [], agent: null, sessionId: null, subscription: null, lastSeq: new Map(),
  streaming: new Map(), tools: new Map(), activeRun: null, reconnectDelay: 500,
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function setStatus(text, kind) { const s = $("status"); s.textContent = text; s.dataset.state = kind; }
// crypto.randomUUID needs a secure context; a gateway on a LAN address over plain HTTP is not one.
const uuid = () => (crypto.randomUUID ? crypto.randomUUID()
  : ([1e7] + -1e3 + -4e3 + -8e3 + -1e11).replace(/[018]/g, (c) => (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16)));
const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
const ms = (value) => (value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`);

// --- connection and RPC ------------------------------------------------------------------------

function connect() {
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
  const ws = new WebSocket(url);
  state.ws = ws;
  setStatus("connecting…", "connecting");
  ws.onopen = async () => {
    state.reconnectDelay = 500;
    try {
      if (state.token) await rpc("auth", { token: state.token });
      const health = await rpc("health");
      $("auth").hidden = true;
      setStatus("connected", "open");
      await ready(health);
    } catch (err) {
      if (err.status === 401 || err.status === 429) askToken(err.message);
      else setStatus(err.message, "closed");
    }
  };
  ws.onmessage = (message) => onFrame(JSON.parse(message.data));
  ws.onclose = (event) => {
    for (const { reject } of state.pending.values()) reject(Object.assign(new Error("connection closed"), { status: 0 }));
    state.pending.clear();
    state.subscription = null;
    setStatus("disconnected", "closed");
    if (event.code === 4401 || event.code === 4429) return; // waiting for a token
    setTimeout(connect, state.reconnectDelay);
    state.reconnectDelay = Math.min(state.reconnectDelay * 2, 8000);
  };
}

function rpc(method, params = {}) {
  return new Promise((resolve, reject) => {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return reject(new Error("not connected"));
    const id = state.nextId++;
    state.pending.set(id, { resolve, reject });
    state.ws.send(JSON.stringify({ id, method, params }));
  });
}

function onFrame(frame) {
  if (frame.type === "event") return onEvent(frame.event);
  if (frame.type === "end") return;
  const waiter = state.pending.get(frame.id);
  if (!waiter) return;
  state.pending.delete(frame.id);
  if (frame.ok) waiter.resolve(frame.result);
  else waiter.reject(Object.assign(new Error(frame.error.message), frame.error));
}

function askToken(message) {
  $("auth").hidden = false;
  $("auth-error").textContent = message || "";
  setStatus("needs a token", "closed");
}

$("auth-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("loopwright-token", state.token);
  if (state.ws) state.ws.close();
  connect();
});

// --- agents and sessions -----------------------------------------------------------------------

async function ready(health) {
  state.agents = health.agents;
  const select = $("agent");
  const [hashAgent, hashSession] = decodeURIComponent(location.hash.slice(1)).split("/");
  select.replaceChildren(...health.agents.map((a) => el("option", { value: a.name }, a.name)));
  const chosen = health.agents.find((a) => a.name === (hashAgent || state.agent)) || health.agents[0];
  select.value = chosen.name;
  await chooseAgent(chosen.name, hashSession || state.sessionId);
}

$("agent").addEventListener("change", () => chooseAgent($("agent").value, null));

async function chooseAgent(name, sessionId) {
  state.agent = name;
  const info = state.agents.find((a) => a.name === name);
  $("model").textContent = info ? `model ${info.model}` : "";
  await refreshSessions();
  await openSession(sessionId || null);
}

async function refreshSessions() {
  const { sessions } = await rpc("sessions.list", { agent: state.agent, limit: 100 });
  $("session-list").replaceChildren(
    ...sessions.map((s) =>
      el("li", { "data-session": s.id, "aria-current": String(s.id === state.sessionId), onclick: () => openSession(s.id) },
        el("span", { class: "title" }, s.title || s.id),
        el("span", { class: "meta" }, `${s.messageCount} messages · ${new Date(s.updatedAt).toLocaleString()}${s.running ? " · running" : ""}`)),
    ),
  );
}

$("new-session").addEventListener("click", () => openSession(null));

async function openSession(sessionId) {
  const fresh = !sessionId;
  state.sessionId = sessionId || uuid();
  state.streaming.clear();
  state.tools.clear();
  state.lastSeq.clear();
  state.activeRun = null;
  $("stop").hidden = true;
  history.replaceState(null, "", `#${encodeURIComponent(state.agent)}/${encodeURIComponent(state.sessionId)}`);
  $("session-id").textContent = state.sessionId;
  $("session-title").textContent = fresh ? "New session" : "";
  $("transcript").replaceChildren();
  $("report-list").replaceChildren();
  for (const li of $("session-list").children) li.setAttribute("aria-current", String(li.dataset.session === state.sessionId));
  if (state.subscription) rpc("unsubscribe", { subscriptionId: state.subscription }).catch(() => {});
  state.subscription = null;
  if (!fresh) await loadHistory();
  const sub = await rpc("subscribe", { sessionId: state.sessionId, agent: state.agent, after: Object.fromEntries(state.lastSeq) });
  state.subscription = sub.subscriptionId;
  await refreshApprovals();
}

async function loadHistory() {
  let offset = 0;
  const entries = [];
  let page;
  do {
    page = await rpc("sessions.get", { sessionId: state.sessionId, agent: state.agent, offset, limit: 500, reports: offset === 0 });
    if (offset === 0) {
      $("session-title").textContent = page.session.title || "Session";
      renderReports(page.reports || []);
    }
    entries.push(...page.entries);
    offset = page.nextOffset;
  } while (offset !== null && offset !== undefined);
  const latency = new Map();
  for (const report of page.reports || state.reports || []) for (const step of report.steps) for (const call of step.toolCalls) latency.set(call.callId, call.latencyMs);
  renderEntries(entries, latency);
}

function renderEntries(entries, latency) {
  const list = $("transcript");
  for (const entry of entries) {
    if (entry.role === "user") list.append(el("li", { class: "msg user" }, entry.content));
    else if (entry.role === "assistant") {
      if (entry.content) list.append(el("li", { class: "msg assistant" }, entry.content));
      for (const call of entry.tool_calls || []) {
        const card = toolCard(call.id, call.name, parseArgs(call.arguments));
        list.append(card.node);
        if (latency.has(call.id)) card.duration(latency.get(call.id));
      }
    } else if (entry.role === "tool") {
      const card = state.tools.get(entry.tool_call_id);
      if (card) card.result(entry.content, entry.is_error);
    } else if (entry.type) list.append(el("li", { class: "msg note" }, `· ${entry.type} ·`));
  }
  list.scrollTop = list.scrollHeight;
}

function parseArgs(text) { try { return JSON.parse(text); } catch { return text; } }

function renderReports(reports) {
  state.reports = reports;
  $("report-list").replaceChildren(
    ...reports.slice().reverse().map((r) => {
      const bad = r.error || ["error", "timeout"].includes(r.reason);
      const tools = r.steps.flatMap((s) => s.toolCalls.map((c) => `${c.toolName} (${ms(c.latencyMs)})`));
      return el("li", { class: "report" },
        el("details", {},
          el("summary", {}, el("span", { class: `reason${bad ? " bad" : ""}` }, r.reason), ` · ${ms(r.totalMs)} · ${new Date(r.startedAt * 1000).toLocaleTimeString()}`),
          el("dl", {},
            el("dt", {}, "message"), el("dd", {}, (r.userMessage || "").slice(0, 200)),
            el("dt", {}, "steps"), el("dd", {}, String(r.stepCount)),
            el("dt", {}, "tools"), el("dd", {}, tools.join(", ") || "none"),
            el("dt", {}, "tokens"), el("dd", {}, `${r.totalUsage.inputTokens} in / ${r.totalUsage.outputTokens} out`),
            el("dt", {}, "model"), el("dd", {}, r.model),
            r.error ? el("dt", {}, "error") : null, r.error ? el("dd", { class: "error" }, r.error) : null,
          )));
    }),
  );
}

// --- live events -------------------------------------------------------------------------------

function toolCard(callId, name, args) {
  const status = el("span", { class: "tool-state" }, "running…");
  const resultBox = el("pre", { class: "result", hidden: "" });
  const resultLabel = el("div", { class: "label", hidden: "" }, "result");
  const actions = el("div", { class: "actions" });
  const node = el("li", { class: "tool", "data-call": callId, "data-state": "running" },
    el("div", { class: "tool-head" }, el("span", { class: "badge" }, "tool"), el("span", { class: "tool-name" }, name), status),
    el("div", { class: "label" }, "arguments"), el("pre", { class: "args" }, pretty(args)),
    resultLabel, resultBox, actions);
  let took = null;
  const card = {
    node,
    duration(value) { took = value; status.textContent = `done in ${ms(value)}`; },
    result(text, isError) {
      resultBox.textContent = text;
      resultBox.hidden = false;
      resultLabel.hidden = false;
      node.dataset.state = isError ? "error" : "done";
      actions.replaceChildren();
      if (took === null) status.textContent = isError ? "error" : "done";
      else status.textContent = `${isError ? "error" : "done"} in ${ms(took)}`;
    },
    pending(approval) {
      node.dataset.state = "pending";
      status.textContent = `waiting for approval: ${approval.reason || ""}`;
      actions.replaceChildren(
        el("button", { class: "approve", type: "button", onclick: () => resolveApproval(approval.approvalId, "approve") }, "Approve"),
        el("button", { class: "deny", type: "button", onclick: () => resolveApproval(approval.approvalId, "deny") }, "Deny"));
    },
    resolved(decision) { actions.replaceChildren(); status.textContent = `${decision}d`; node.dataset.state = "running"; },
  };
  state.tools.set(callId, card);
  return card;
}

function assistantBubble(runId) {
  let bubble = state.streaming.get(runId);
  if (!bubble) {
    bubble = el("li", { class: "msg assistant streaming", "data-run": runId });
    $("transcript").append(bubble);
    state.streaming.set(runId, bubble);
  }
  return bubble;
}

function onEvent(event) {
  const seen = state.lastSeq.get(event.runId) || 0;
  if (event.seq <= seen) return; // already shown (resumed subscription)
  state.lastSeq.set(event.runId, event.seq);
  const data = event.data;
  const list = $("transcript");
  if (event.stream === "lifecycle" && data.phase === "start") {
    state.activeRun = event.runId;
    $("stop").hidden = false;
    refreshSessions();
  } else if (event.stream === "assistant" && data.kind === "text") {
    assistantBubble(event.runId).append(data.delta);
  } else if (event.stream === "assistant" && data.kind === "discard") {
    const bubble = state.streaming.get(event.runId);
    if (bubble) bubble.textContent = "";
  } else if (event.stream === "tool" && data.phase === "start") {
    const bubble = state.streaming.get(event.runId);
    if (bubble) { bubble.classList.remove("streaming"); if (!bubble.textContent) bubble.remove(); state.streaming.delete(event.runId); }
    list.append(toolCard(data.callId, data.name, data.args).node);
  } else if (event.stream === "tool" && data.phase === "update" && data.approval) {
    const card = state.tools.get(data.callId);
    if (data.approval.state === "pending") card?.pending(data.approval);
    else card?.resolved(data.approval.decision);
    refreshApprovals();
  } else if (event.stream === "tool" && data.phase === "end") {
    const card = state.tools.get(data.callId);
    if (card) { card.duration(data.durationMs); card.result(data.result, data.isError); }
  } else if (event.stream === "lifecycle" && (data.phase === "end" || data.phase === "error")) {
    const bubble = state.streaming.get(event.runId);
    if (bubble) bubble.classList.remove("streaming");
    if (!bubble && data.text) list.append(el("li", { class: "msg assistant", "data-run": event.runId }, data.text));
    if (data.phase === "error") list.append(el("li", { class: "msg note failed" }, `run failed: ${data.error?.message || data.reason}`));
    else if (data.reason && data.reason !== "done") list.append(el("li", { class: "msg note" }, `run ended: ${data.reason}`));
    state.streaming.delete(event.runId);
    if (state.activeRun === event.runId) { state.activeRun = null; $("stop").hidden = true; }
    refreshSessions();
    refreshApprovals();
    rpc("sessions.get", { sessionId: state.sessionId, agent: state.agent, limit: 1 }).then((p) => renderReports(p.reports || [])).catch(() => {});
  }
  list.scrollTop = list.scrollHeight;
}

async function refreshApprovals() {
  const box = $("approvals");
  let approvals = [];
  try { ({ approvals } = await rpc("approvals.list", { agent: state.agent, sessionId: state.sessionId })); } catch { /* offline */ }
  box.hidden = approvals.length === 0;
  box.replaceChildren(
    el("h2", {}, "Waiting for approval"),
    ...approvals.map((a) => el("div", { class: "approval", "data-approval": a.approvalId },
      el("span", { class: "tool-name" }, a.tool), el("code", {}, JSON.stringify(a.arguments)), el("span", { class: "muted" }, a.reason),
      el("button", { class: "approve", type: "button", onclick: () => resolveApproval(a.approvalId, "approve") }, "Approve"),
      el("button", { class: "deny", type: "button", onclick: () => resolveApproval(a.approvalId, "deny") }, "Deny"))));
  for (const a of approvals) state.tools.get(a.callId)?.pending(a);
}

async function resolveApproval(approvalId, decision) {
  try { await rpc("approvals.resolve", { approvalId, decision, agent: state.agent }); }
  catch (err) { alert(err.message); }
  await refreshApprovals();
}

// --- sending -----------------------------------------------------------------------------------

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("message").value;
  if (!text.trim()) return;
  $("send").disabled = true;
  const bubble = el("li", { class: "msg user" }, text);
  $("transcript").append(bubble); // before the answer's first event can arrive
  try {
    await rpc("agent", { message: text, sessionId: state.sessionId, agent: state.agent, idempotencyKey: uuid() });
    $("message").value = "";
    if ($("session-title").textContent === "New session") $("session-title").textContent = text.split("\n")[0].slice(0, 80);
  } catch (err) {
    bubble.classList.add("failed");
    $("transcript").append(el("li", { class: "msg note failed" }, `not sent: ${err.message}`));
  } finally {
    $("send").disabled = false;
    $("message").focus();
  }
});

$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});

$("stop").addEventListener("click", () => { if (state.activeRun) rpc("agent.stop", { runId: state.activeRun }).catch(() => {}); });

connect();
