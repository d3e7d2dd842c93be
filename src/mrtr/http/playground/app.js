// mrtr playground: a small MCP client in the page (no build step, no network beyond this origin).
// 2026-07-28: each round is its own POST (input_required -> inputResponses + requestState).
// 2025: initialize opens a session; the server pushes its asks on the call's SSE stream and
// the page answers each with a POST. Every POST carries a trace id; /_playground/trace tells
// which rounds ran and which were replayed from the store (docs/playground.md).
"use strict";

const MODERN = "2026-07-28";
const LEGACY = "2025-11-25";
const CAPS = { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };
const TASKS = "io.modelcontextprotocol/tasks";  // 2026 only: a task tool may answer with a task
const CLIENT = { name: "mrtr-playground", version: "1" };
const state = { info: null, era: "2026", session: null, nextId: 1, flow: null, busy: false };

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function pretty(value) { return JSON.stringify(value, null, 2); }

function traceId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---- the wire -----------------------------------------------------------------------------

function headerValue(text) {  // Mcp-Name / Mcp-Param-*: the base64 sentinel when needed
  const plain = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(text) && !text.startsWith("=?");
  if (plain) return text;
  const utf8 = new TextEncoder().encode(text);
  return "=?base64?" + btoa(String.fromCharCode(...utf8)) + "?=";
}

function modernHeaders(method, params, schema) {
  const headers = { "MCP-Protocol-Version": MODERN, "Mcp-Method": method };
  const name = params.name !== undefined ? params.name : params.uri !== undefined ? params.uri : params.taskId;
  if (name !== undefined) headers["Mcp-Name"] = headerValue(String(name));
  const props = (schema && schema.properties) || {};
  for (const [key, prop] of Object.entries(props)) {
    const value = (params.arguments || {})[key];
    if (prop && prop["x-mcp-header"] && value !== undefined && value !== null) {
      headers["Mcp-Param-" + prop["x-mcp-header"]] = headerValue(String(value));
    }
  }
  return headers;
}

// POST one message; `onMessage` sees every SSE message before the final one (notifications,
// a session's pushed requests). Resolves {status, headers, reply, ms, trace, body}.
async function post(message, headers, onMessage) {
  const trace = traceId();
  const body = JSON.stringify(message);
  const started = performance.now();
  const response = await fetch(state.info.endpoint, {
    method: "POST", body,
    headers: { "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               [state.info.traceHeader]: trace, ...headers },
  });
  let reply = null;
  const type = response.headers.get("content-type") || "";
  if (type.startsWith("text/event-stream")) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (!data) continue;
        const parsed = JSON.parse(data);
        if (parsed.id === message.id && ("result" in parsed || "error" in parsed)) reply = parsed;
        else if (onMessage) await onMessage(parsed);
      }
    }
  } else {
    const text = await response.text();
    reply = text ? JSON.parse(text) : null;
  }
  return { status: response.status, headers: response.headers, reply, body, trace,
           ms: Math.round(performance.now() - started) };
}

async function traced(trace) {
  const response = await fetch("/_playground/trace?id=" + encodeURIComponent(trace));
  return (await response.json()).rounds;
}

function meta(extra) {
  return { "io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": { ...CAPS, extensions: { [TASKS]: {} } },
           "io.modelcontextprotocol/clientInfo": CLIENT,
           "io.modelcontextprotocol/logLevel": "debug", ...extra };
}

async function modern(method, params) {  // a one-round request (lists, tasks/*): never asks
  const message = { jsonrpc: "2.0", id: state.nextId++, method, params: { ...params, _meta: meta() } };
  const sent = await post(message, modernHeaders(method, params));
  return sent.reply;
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

async function followTask(target, created) {  // poll tasks/get, answer its asks by tasks/update
  const id = created.taskId;
  const status = el("p", { class: "task-status" });
  target.node.append(status);
  const answered = new Set();  // keys are never reused within a task: answer each once
  for (;;) {
    const reply = await modern("tasks/get", { taskId: id });
    const task = reply && reply.result;
    if (!task) throw new Error("tasks/get failed: " + pretty(reply));
    status.textContent = `task ${id}: ${task.status}${task.statusMessage ? " (" + task.statusMessage + ")" : ""}`;
    if (task.status === "completed") return { jsonrpc: "2.0", id: reply.id, result: task.result };
    if (task.status === "failed") return { jsonrpc: "2.0", id: reply.id, error: task.error };
    if (task.status === "cancelled") return { jsonrpc: "2.0", id: reply.id, error: { message: "cancelled" } };
    if (task.status === "input_required") {
      const responses = {};
      for (const [key, ask] of Object.entries(task.inputRequests || {})) {
        if (answered.has(key)) continue;
        answered.add(key);
        responses[key] = await answer(key, ask);
      }
      if (Object.keys(responses).length) await modern("tasks/update", { taskId: id, inputResponses: responses });
    }
    await sleep(Math.max(250, Math.min(task.pollIntervalMs || 1000, 2000)));
  }
}

async function openSession() {
  const init = { jsonrpc: "2.0", id: state.nextId++, method: "initialize",  // no extensions
                 params: { protocolVersion: LEGACY, capabilities: CAPS, clientInfo: CLIENT } };
  const sent = await post(init, {});
  const id = sent.headers.get("mcp-session-id");
  if (!id || !sent.reply || sent.reply.error) throw new Error("initialize failed: " + pretty(sent.reply));
  const version = sent.reply.result.protocolVersion;
  state.session = { id, version };
  await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sessionHeaders());
  await post({ jsonrpc: "2.0", id: state.nextId++, method: "logging/setLevel",
               params: { level: "debug" } }, sessionHeaders());
  return state.session;
}

function sessionHeaders() {
  return { "Mcp-Session-Id": state.session.id, "MCP-Protocol-Version": state.session.version };
}

// ---- the catalogue ----------------------------------------------------------------------------

async function loadCatalogue() {
  state.info = await (await fetch("/_playground/info")).json();
  $("server").textContent = `${state.info.server} ${state.info.version || ""}`;
  $("store").textContent = state.info.store ? `store: ${state.info.store}` : "no store: replays run again";
  const lists = [["tools/list", "tools", "tool"], ["prompts/list", "prompts", "prompt"],
                 ["resources/list", "resources", "resource"]];
  for (const [method, key, kind] of lists) {
    const reply = await modern(method, {});
    const items = (reply && reply.result && reply.result[key]) || [];
    const list = $(key);
    list.replaceChildren(...items.map((item) => el("li", {}, el("button", {
      "data-kind": kind, "data-name": item.name || item.uri, title: item.description || "",
      onclick: (event) => choose(kind, item, event.currentTarget),
    }, item.name || item.uri))));
    if (!items.length) list.append(el("li", { class: "hint" }, "none"));
  }
}

function choose(kind, item, button) {
  document.querySelectorAll("nav button.chosen").forEach((b) => b.classList.remove("chosen"));
  button.classList.add("chosen");
  const schema = kind === "tool" ? item.inputSchema : kind === "prompt" ? promptSchema(item) : null;
  const form = schema ? formFor(schema, "arg") : el("p", { class: "hint" }, item.uri);
  const run = el("button", { class: "act", id: "run", onclick: () => start(kind, item, schema, form) }, "Run");
  $("target").replaceChildren(el("h2", {}, item.name || item.uri),
    el("p", { class: "hint" }, item.description || ""),
    schema ? el("details", {}, el("summary", {}, "schema"), el("pre", {}, pretty(schema))) : null,
    form, run);
}

function promptSchema(prompt) {
  const properties = {};
  const required = [];
  for (const arg of prompt.arguments || []) {
    properties[arg.name] = { type: "string", title: arg.name, description: arg.description };
    if (arg.required) required.push(arg.name);
  }
  return { type: "object", properties, required };
}

// ---- forms from a JSON schema (arguments and requestedSchema alike) -------------------------

function options(prop) {
  const titled = prop.oneOf || prop.anyOf;
  if (Array.isArray(titled)) return titled.map((o) => [o.const, o.title || String(o.const)]);
  return Array.isArray(prop.enum) ? prop.enum.map((v) => [v, String(v)]) : null;
}

function formFor(schema, prefix) {
  const form = el("form", { class: "schema", novalidate: "" });
  form.addEventListener("submit", (event) => event.preventDefault());
  const required = new Set(schema.required || []);
  for (const [key, prop] of Object.entries(schema.properties || {})) {
    const id = `${prefix}-${key}`;
    const title = prop.title || key;
    let input;
    const choices = options(prop);
    const many = prop.type === "array" ? options(prop.items || {}) : null;
    if (many) {
      input = el("span", { id, "data-many": "" }, many.map(([value, label]) => el("label", {},
        el("input", { type: "checkbox", value: JSON.stringify(value),
                      checked: (prop.default || []).includes(value) }), " ", label, " ")));
    } else if (choices) {
      input = el("select", { id }, el("option", { value: "" }, required.has(key) ? "choose…" : "(none)"),
        choices.map(([value, label]) => el("option", { value: JSON.stringify(value),
          selected: prop.default === value }, label)));
    } else if (prop.type === "boolean") {
      input = el("input", { id, type: "checkbox", checked: prop.default === true });
    } else {
      const hint = prop.format === "date" ? "2026-07-28" : prop.format === "date-time"
        ? "2026-07-28T09:30:00Z" : prop.format === "email" ? "name@example.com"
        : prop.format === "uri" ? "https://example.com" : "";
      input = el("input", { id, type: "text", placeholder: hint,
        value: prop.default !== undefined ? String(prop.default) : null,
        inputmode: prop.type === "integer" || prop.type === "number" ? "decimal" : null });
    }
    input.dataset.key = key;
    input.dataset.type = prop.type || "string";
    const bounds = [prop.minimum !== undefined ? `≥ ${prop.minimum}` : null,
                    prop.maximum !== undefined ? `≤ ${prop.maximum}` : null,
                    prop.format || null].filter(Boolean).join(", ");
    form.append(el("label", { class: "field", for: id },
      el("span", {}, title, required.has(key) ? " *" : "", bounds ? el("small", {}, ` (${bounds})`) : null),
      prop.description ? el("small", {}, prop.description) : null, input,
      el("small", { class: "error", id: `${id}-error`, "data-for": key })));
  }
  return form;
}

function readForm(form) {  // values typed as the schema says; what will not parse goes as typed
  const content = {};
  for (const input of form.querySelectorAll("[data-key]")) {
    const key = input.dataset.key;
    if (input.hasAttribute("data-many")) {
      content[key] = Array.from(input.querySelectorAll("input:checked"), (c) => JSON.parse(c.value));
    } else if (input.tagName === "SELECT") {
      if (input.value !== "") content[key] = JSON.parse(input.value);
    } else if (input.type === "checkbox") {
      content[key] = input.checked;
    } else if (input.value.trim() !== "") {
      const text = input.value.trim();
      const number = Number(text);
      const numeric = input.dataset.type === "integer" || input.dataset.type === "number";
      content[key] = numeric && text !== "" && !Number.isNaN(number) ? number : text;
    }
  }
  return content;
}

async function problemsOf(schema, content) {  // the server's own checker: its rules, its words
  const response = await fetch("/_playground/validate", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ schema, content }) });
  const answer = await response.json();
  return answer.problems || { content: (answer.error && answer.error.message) || "cannot validate" };
}

function showProblems(form, prefix, problems) {
  for (const node of form.querySelectorAll(".error")) node.textContent = "";
  for (const node of form.querySelectorAll(".invalid")) node.classList.remove("invalid");
  let shown = false;
  for (const [key, text] of Object.entries(problems)) {
    const slot = form.querySelector(`#${CSS.escape(prefix + "-" + key)}-error`);
    if (slot) {
      slot.textContent = text;
      form.querySelector(`#${CSS.escape(prefix + "-" + key)}`).classList.add("invalid");
      shown = true;
    }
  }
  if (!shown && Object.keys(problems).length) {
    form.append(el("small", { class: "error" }, Object.values(problems).join("; ")));
  }
  return Object.keys(problems).length === 0;
}

// ---- answering asks -----------------------------------------------------------------------------

function answer(key, ask) {  // a Promise of the InputResponse for one InputRequest
  const params = ask.params || {};
  return new Promise((resolve) => {
    const box = el("div", { class: "ask", "data-key": key });
    const done = (value) => { box.remove(); resolve(value); };
    const refuse = [el("button", { class: "act quiet", onclick: () => done({ action: "decline" }) }, "Decline"),
                    el("button", { class: "act quiet", onclick: () => done({ action: "cancel" }) }, "Cancel")];
    if (ask.method === "elicitation/create" && params.mode === "url") {
      box.append(el("h3", {}, `${key}: open a page`), el("p", {}, params.message || ""),
        el("a", { href: params.url, target: "_blank", rel: "noopener noreferrer" }, params.url),
        el("div", {}, el("button", { class: "act open", onclick: () => {
          window.open(params.url, "_blank", "noopener");
          done({ action: "accept" });
        } }, "Open in a new tab"), refuse));
    } else if (ask.method === "elicitation/create") {
      const schema = params.requestedSchema || { type: "object", properties: {} };
      const form = formFor(schema, "ask-" + key);
      const submit = el("button", { class: "act submit", id: `submit-${key}`, onclick: async () => {
        const content = readForm(form);
        if (showProblems(form, "ask-" + key, await problemsOf(schema, content))) {
          done({ action: "accept", content });
        }
      } }, "Submit");
      box.append(el("h3", {}, `${key}: ${params.message || "a form"}`), form, el("div", {}, submit, refuse));
    } else if (ask.method === "sampling/createMessage") {
      const reply = el("textarea", { id: `reply-${key}`, placeholder: "type the model's reply" });
      box.append(el("h3", {}, `${key}: the server asks a model`),
        el("pre", {}, pretty(params.messages || [])), reply,
        el("div", {}, el("button", { class: "act submit", onclick: () => done({
          role: "assistant", content: { type: "text", text: reply.value },
          model: "playground-human", stopReason: "endTurn" }) }, "Send reply")));
    } else if (ask.method === "roots/list") {
      resolve({ roots: [] });
      return;
    } else {
      resolve({ action: "decline" });
      return;
    }
    $("ask").append(box);
  });
}

// ---- the timeline -------------------------------------------------------------------------------

function card(title) {
  const notes = el("ul", { class: "notes" });
  const node = el("li", { class: "card" }, el("h3", {}, title), el("div", { class: "facts" }), notes);
  $("timeline").append(node);
  return { node, notes, facts: node.querySelector(".facts") };
}

function note(target, message) {
  const params = message.params || {};
  const text = message.method === "notifications/progress"
    ? `progress ${params.progress}${params.total !== undefined ? "/" + params.total : ""} ${params.message || ""}`
    : message.method === "notifications/message"
      ? `log ${params.level}: ${typeof params.data === "string" ? params.data : JSON.stringify(params.data)}`
      : `${message.method || "message"} ${JSON.stringify(params)}`;
  target.notes.append(el("li", {}, text));
}

function fill(target, sent, rounds, request) {
  const result = sent.reply && sent.reply.result;
  const parts = [`HTTP ${sent.status}`, `${sent.ms} ms`];
  if (result && result.requestState) parts.push(`requestState ${result.requestState.length} bytes (expiry sealed inside)`);
  for (const r of rounds) {
    parts.push(`${r.method} round ${r.round}${r.flow ? " of flow " + r.flow.slice(0, 8) : ""}: ${r.replayed ? "replayed from the store" : "ran"}`);
  }
  target.facts.textContent = parts.join(" · ");
  target.node.append(
    el("details", {}, el("summary", {}, "request"), el("pre", {}, pretty(request))),
    el("details", {}, el("summary", {}, "response"), el("pre", { class: "response" }, pretty(sent.reply))),
    copyButtons(request));
}

function shellQuote(text) { return "'" + String(text).replace(/'/g, "'\\''") + "'"; }

function copyButtons(request) {
  const url = new URL(state.info.endpoint, location.href).href;
  const params = request.params || {};
  const words = ["mrtr", "call", url, params.name || params.uri || ""];
  for (const [key, value] of Object.entries(params.arguments || {})) {
    words.push(typeof value === "string" ? `${key}=${shellQuote(value)}` : `${key}=${shellQuote(JSON.stringify(value))}`);
  }
  const call = words.join(" ");
  const headers = state.era === "2025" && state.session ? sessionHeaders() : modernHeaders(request.method, params);
  const curl = ["curl -sS -X POST", shellQuote(url), "-H 'Content-Type: application/json'",
    "-H 'Accept: application/json, text/event-stream'",
    ...Object.entries(headers).map(([k, v]) => "-H " + shellQuote(`${k}: ${v}`)),
    "--data-raw", shellQuote(JSON.stringify(request))].join(" ");
  const copy = (text) => () => navigator.clipboard && navigator.clipboard.writeText(text);
  return el("div", { class: "copy" },
    el("button", { class: "act quiet", onclick: copy(call) }, "Copy as mrtr call"),
    el("button", { class: "act quiet", onclick: copy(curl) }, "Copy as curl"),
    el("details", {}, el("summary", {}, "commands"), el("pre", { class: "mrtr-call" }, call), el("pre", { class: "curl" }, curl)));
}

// ---- running a flow -----------------------------------------------------------------------------

function firstRequest(kind, item, args) {
  if (kind === "tool") return { method: "tools/call", params: { name: item.name, arguments: args } };
  if (kind === "prompt") return { method: "prompts/get", params: { name: item.name, arguments: args } };
  return { method: "resources/read", params: { uri: item.uri } };
}

async function start(kind, item, schema, form) {
  if (state.busy) return;
  const args = schema ? readForm(form) : {};
  if (schema && !showProblems(form, "arg", await problemsOf(schema, args))) return;
  state.busy = true;
  state.era = document.querySelector("input[name=era]:checked").value;
  $("timeline").replaceChildren();
  $("outcome").replaceChildren();
  $("ask").replaceChildren();
  const first = firstRequest(kind, item, args);
  try {
    state.flow = state.era === "2025" ? await runSession(first, schema) : await runRounds(first, schema);
    showOutcome(state.flow.outcome || state.flow.last.reply);
  } catch (error) {
    $("outcome").replaceChildren(el("div", { class: "note again" }, String(error)));
  } finally {
    state.busy = false;
  }
}

async function runRounds(first, schema) {
  let params = { ...first.params };
  for (let round = 1; round <= 32; round++) {
    const request = { jsonrpc: "2.0", id: state.nextId++, method: first.method,
                      params: { ...params, _meta: meta({ progressToken: `p${state.nextId}` }) } };
    const target = card(`Round ${round}: ${first.method} ${params.name || params.uri}`);
    const sent = await post(request, modernHeaders(first.method, params, schema), (m) => note(target, m));
    fill(target, sent, await traced(sent.trace), request);
    const result = sent.reply && sent.reply.result;
    if (result && result.resultType === "task") {
      return { era: "2026", last: sent, request, schema, outcome: await followTask(target, result) };
    }
    if (!result || result.resultType !== "input_required") {
      return { era: "2026", last: sent, request, schema };
    }
    const asks = result.inputRequests || {};
    target.facts.append(` · asks: ${Object.keys(asks).join(", ") || "none (retry at once)"}`);
    const responses = {};
    for (const [key, ask] of Object.entries(asks)) responses[key] = await answer(key, ask);
    params = { ...first.params, inputResponses: responses };
    if (result.requestState !== undefined) params.requestState = result.requestState;
  }
  throw new Error("more than 32 rounds: stopped");
}

async function runSession(first, schema) {
  if (!state.session) await openSession();
  const params = { ...first.params };
  if (first.method === "tools/call") params.idempotencyKey = "pg-" + traceId();
  params._meta = { progressToken: `p${state.nextId}` };
  const request = { jsonrpc: "2.0", id: state.nextId++, method: first.method, params };
  let target = card(`Call: ${first.method} ${params.name || params.uri} (session ${state.session.version})`);
  const opened = target;
  let asked = 0;
  const sent = await post(request, sessionHeaders(), async (message) => {
    if (message.id === undefined || !message.method) { note(target, message); return; }
    asked += 1;
    const ask = card(`Pushed ask ${asked}: ${message.method} (id ${message.id})`);
    ask.node.append(el("details", {}, el("summary", {}, "request"), el("pre", {}, pretty(message))));
    target = ask;
    const started = performance.now();
    const result = await answer(String(message.id), message);
    const reply = { jsonrpc: "2.0", id: message.id, result };
    const posted = await post(reply, sessionHeaders());
    ask.facts.textContent = `answered by POST: HTTP ${posted.status} · ${Math.round(performance.now() - started)} ms`;
    ask.node.append(el("details", {}, el("summary", {}, "answer"), el("pre", {}, pretty(reply))));
  });
  const rounds = await traced(sent.trace);  // one card per POST: the call's holds its result
  fill(opened, sent, rounds, request);
  opened.facts.prepend(`the call's SSE stream carried ${asked} pushed ask(s), then the result · `);
  return { era: "2025", last: sent, request, schema };
}

function showOutcome(reply) {
  const result = reply && reply.result;
  const text = result && Array.isArray(result.content)
    ? result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n") : "";
  const replay = el("button", { class: "act", id: "replay", onclick: replayLast }, "Replay last round");
  $("outcome").replaceChildren(el("div", { id: "result" }, el("h3", {}, reply && reply.error ? "Error" : "Result"),
    text ? el("p", { class: "result-text" }, text) : null, el("pre", {}, pretty(reply)), replay));
}

async function replayLast() {
  const flow = state.flow;
  if (!flow || state.busy) return;
  state.busy = true;
  try {
    let sent;
    const target = card(`Replay: the last ${flow.era === "2025" ? "call" : "round"}, sent again`);
    if (flow.era === "2025") {  // the same call and idempotencyKey, a new id
      const request = { ...flow.request, id: state.nextId++ };
      sent = await post(request, sessionHeaders(), (m) => note(target, m));
      fill(target, sent, await traced(sent.trace), request);
      flow.request = request;
    } else {  // byte for byte what was sent
      const request = JSON.parse(flow.last.body);
      sent = await post(request, modernHeaders(request.method, request.params, flow.schema), (m) => note(target, m));
      fill(target, sent, await traced(sent.trace), request);
    }
    const rounds = await traced(sent.trace);
    const same = JSON.stringify((sent.reply || {}).result) === JSON.stringify((flow.last.reply || {}).result);
    const stored = rounds.length > 0 && rounds.every((r) => r.replayed);
    const words = stored
      ? `stored outcome, no second execution${same ? " (the same result)" : ""}`
      : `executed again: the server ${state.info.store ? "ran the handler a second time" : "has no store, so a replay runs again"}`;
    $("outcome").append(el("div", { class: "note " + (stored ? "stored" : "again"), id: "replay-note" }, words));
  } finally {
    state.busy = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const radio of document.querySelectorAll("input[name=era]")) {
    radio.addEventListener("change", () => { state.era = radio.value; });
  }
  loadCatalogue().catch((error) => $("target").replaceChildren(el("p", { class: "error" }, String(error))));
});
