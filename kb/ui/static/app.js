/* kb web UI: plain JavaScript, no build step. Document text is untrusted: it only ever reaches the page
   through textContent / attribute setters (the el() helper), never parsed as HTML. */
"use strict";

const TOKEN_KEY = "kb.token";
const state = { collection: sessionStorage.getItem("kb.collection") || "default", turns: [], jobs: new Map(),
  jobPages: new Map() };

/* ------------------------------------------------------------------ helpers */

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (sel, root = document) => root.querySelector(sel);
const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
const fmt = (x, digits = 3) => (typeof x === "number" ? x.toFixed(digits) : "—");
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
/** "45 s", "12 min", "2 h 5 min": a job's time left. */
const durationText = (s) => s < 60 ? `${Math.round(s)} s` : s < 3600 ? `${Math.round(s / 60)} min`
  : `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;

class ApiError extends Error {
  constructor(status, title, detail) {
    super(detail || title);
    this.status = status;
    this.title = title;
    this.detail = detail;
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...(extra || {}) };
  if (token()) h.Authorization = `Bearer ${token()}`;
  return h;
}

async function failure(res) {
  let title = res.statusText || "Error";
  let detail = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    title = body.title || title;
    detail = body.detail || detail;
  } catch (_) { /* not problem details: keep the status line */ }
  if (res.status === 401) detail += " — set an access token (top right).";
  if (res.status === 403) detail += " — admin actions need the admin token (top right).";
  return new ApiError(res.status, title, detail);
}

async function api(path, options = {}) {
  const init = { method: options.method || "GET", headers: headers(options.headers) };
  if (options.json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.json);
  } else if (options.body !== undefined) {
    init.body = options.body;
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "Server unreachable", "The server did not answer. Is it running?");
  }
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  return options.raw ? res : res.json();
}

/** An image from a guarded endpoint (fetch with the token) as a blob URL, and where its highlight starts. */
async function pageImage(path) {
  const res = await api(path, { raw: true, headers: { Accept: "image/png" } });
  const top = res.headers.get("X-Highlight-Top");
  const found = res.headers.get("X-Highlight-Found");
  return { url: URL.createObjectURL(await res.blob()), top: top === null ? null : Number(top),
    found: found === null ? null : found === "true" };
}

function alertBox(err) {
  const title = err instanceof ApiError ? `${err.title}${err.status ? ` (${err.status})` : ""}` : "Something went wrong";
  return el("div", { class: "alert", role: "alert" }, el("strong", { text: title }), " ", err.detail || err.message);
}

function stateBox(kind, title, text, ...extra) {
  return el("section", { class: `state${kind === "error" ? " state-error" : ""}`, role: kind === "error" ? "alert" : null },
    el("h2", { text: title }), el("p", { text }), ...extra);
}

function loading(text) {
  return el("p", { class: "muted", role: "status" }, el("span", { class: "spinner", "aria-hidden": "true" }), text);
}

function pagesLabel(unit, range) {
  const [a, b] = range;
  const span = a === b ? `${a}` : `${a}–${b}`;
  if (unit === "page") return a === b ? `p. ${span}` : `pp. ${span}`;
  if (unit === "paragraph") return a === b ? `¶ ${span}` : `¶¶ ${span}`;
  return a === b ? `line ${span}` : `lines ${span}`;
}

/** What a document's size counts: pages of a PDF, paragraphs of a .docx/HTML file, else lines. */
function sizeUnit(fileType) {
  if (fileType === "pdf") return "pages";
  return fileType === "docx" || fileType === "html" ? "paragraphs" : "lines";
}

async function collectionSelect(id, onChange) {
  const select = el("select", { id, name: "collection" });
  try {
    const cols = await api("/kb/collections");
    for (const c of cols) select.append(el("option", { value: c.name, text: `${c.name} (${plural(c.documents, "document")})` }));
    if (!cols.some((c) => c.name === state.collection) && cols.length) state.collection = cols[0].name;
  } catch (err) {
    select.append(el("option", { value: state.collection, text: state.collection }));
  }
  select.value = state.collection;
  select.addEventListener("change", () => {
    state.collection = select.value;
    sessionStorage.setItem("kb.collection", select.value);
    if (onChange) onChange(select.value);
  });
  return select;
}

/* What the server takes and does (GET /kb/capabilities): formats, strategies, answer mode. Fetched once;
   a failure (e.g. 401 before a token is set) is not cached, so the next page asks again. */
let capabilitiesRequest = null;

function capabilities() {
  if (!capabilitiesRequest) {
    capabilitiesRequest = api("/kb/capabilities").catch((err) => {
      capabilitiesRequest = null;
      throw err;
    });
  }
  return capabilitiesRequest;
}

/** Fill the strategy selector from the server; without its answer, one option: the server's default. */
async function fillStrategies(select) {
  try {
    const caps = await capabilities();
    select.replaceChildren(...caps.strategies.map((s) =>
      el("option", { value: s.name, text: s.description ? `${s.label} — ${s.description}` : s.label })));
    select.value = caps.default_strategy;
    return caps;
  } catch (_) {
    select.replaceChildren(el("option", { value: "", text: "Server default" }));
    return null;
  }
}

function field(label, input, hint) {
  return el("div", {}, el("label", { for: input.id, text: label }), input, hint ? el("div", { class: "hint", text: hint }) : null);
}

/* ------------------------------------------------------------------ SSE over fetch */

/** POST ``body`` and call ``onEvent(name, data)`` for every server-sent event of the answer. */
async function streamQuery(body, onEvent, signal) {
  let res;
  try {
    res = await fetch("/kb/query", {
      method: "POST", signal,
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ ...body, stream: true }),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "Server unreachable", "The server did not answer. Is it running?");
  }
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const lost = () => new ApiError(0, "Connection lost", "The server stopped before the answer was complete.");
  let buffer = "";
  let ended = false;  // a "done" or "error" event: the server finished the answer
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw lost();
    }
    const { value, done } = chunk;
    if (done) {
      if (!ended) throw lost();
      break;
    }
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      if (name === "done" || name === "error") ended = true;
      onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

/* ------------------------------------------------------------------ Ask */

/** The answer-mode badge: "Offline · extractive answers" or the configured model, with how to change it
    (README.md, "Using an LLM"). */
function modeBadge(caps) {
  const llm = caps.answer_mode === "llm";
  const text = llm ? `LLM · ${caps.chat_model || "configured model"}` : "Offline · extractive answers";
  return el("span", { class: "mode-row" },
    el("span", { class: `chip mode ${llm ? "blue" : ""}`, id: "answer-mode", text,
      title: llm ? "Answers are written by the configured LLM from the cited evidence."
        : "Answers are cited sentences of the evidence; no LLM is configured." }),
    el("details", { class: "mode-help" }, el("summary", { text: llm ? "About LLM answers" : "Use an LLM" }),
      el("div", { class: "mode-pop small" },
        el("p", {}, "Start the server with an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama…):"),
        el("pre", { text: "KB_LLM_BASE_URL=https://api.openai.com/v1\nKB_LLM_API_KEY=sk-…\nKB_LLM_MODEL=gpt-4o-mini" }),
        el("p", {}, "See ", el("a", { href: "/ui/help#using-an-llm", target: "_blank", rel: "noopener",
          id: "llm-help", text: "Using an LLM" }), " in the README (Configuration)."))));
}

function renderAsk(view) {
  const strategy = el("select", { id: "strategy", name: "strategy" });
  const modeSlot = el("span", { class: "mode-slot" });
  const topDocs = el("input", { id: "top-docs", name: "top_docs", type: "number", min: 1, max: 20, placeholder: "automatic" });
  const topK = el("input", { id: "top-k", name: "top_k", type: "number", min: 1, max: 50, value: 5 });
  const filters = el("textarea", { id: "filters", name: "filters", rows: 2, spellcheck: "false",
    placeholder: '{"company": "Helios Robotics", "fiscal_year": 2023}' });
  const documents = el("input", { id: "documents", name: "documents", type: "text", spellcheck: "false",
    placeholder: "e.g. helios-robotics-2023-annual-report.md, 12", value: (state.askDocuments || []).join(", ") });
  const expert = el("textarea", { id: "expert", name: "expert_knowledge", rows: 2,
    placeholder: "e.g. Fiscal years end in June; revenue means net sales." });
  const question = el("textarea", { id: "question", name: "query", rows: 2, required: true,
    placeholder: "Ask a question about your documents…" });
  const ask = el("button", { type: "submit", class: "primary", id: "ask-btn", text: "Ask" });
  const reset = el("button", { type: "button", class: "ghost", id: "new-chat", text: "New conversation" });
  const conversation = el("div", { class: "conversation", id: "conversation", "aria-live": "polite" });
  const formError = el("div", { id: "form-error" });
  const colSlot = el("div", {});

  const form = el("form", { class: "panel stack", id: "ask-form", "aria-label": "Ask a question" },
    el("div", { class: "question-box" },
      el("div", { class: "grow" }, el("label", { for: "question", class: "sr-label", text: "Question" }), question),
      ask),
    el("div", { class: "grid cols-ask" }, colSlot),
    el("details", { class: "more", id: "advanced" }, el("summary", { text: "Advanced" }),
      el("div", { class: "grid cols-3" },
        field("How to pick documents", strategy, "Auto tries metadata filters first, then similarity."),
        field("Documents to read", topDocs, "Empty: as many as the question needs."),
        field("Passages to cite", topK, "Evidence passages the answer is built from.")),
      el("div", { class: "grid cols-2" },
        field("Only these documents", documents, "Names or ids, separated by commas: routing is skipped."),
        field("Metadata filters (JSON)", filters, "Only documents whose metadata match, e.g. company and fiscal_year.")),
      el("div", { class: "grid cols-2" },
        field("Expert knowledge", expert, "Domain hints passed to document and section selection."))),
    formError);

  view.replaceChildren(
    el("div", { class: "page-head" },
      el("div", {}, el("h1", { text: "Ask" }),
        el("p", { class: "muted" }, "Answers cite the page they come from; sources open beside the answer. ", modeSlot)),
      reset),
    form, conversation);
  const askAgain = (q, strat) => {
    question.value = q;
    if (strat && [...strategy.options].some((o) => o.value === strat)) strategy.value = strat;
    form.requestSubmit();
  };
  state.askAgain = askAgain;
  if (state.askDocuments && state.askDocuments.length) {
    form.querySelector("#advanced").open = true;
    state.askDocuments = null;  // handed over once: a later visit starts unscoped
  }
  fillStrategies(strategy).then((caps) => { if (caps) modeSlot.replaceChildren(modeBadge(caps)); });
  collectionSelect("collection", () => {
    if (!state.turns.length) conversation.replaceChildren(emptyConversation(askAgain));
  }).then((select) => colSlot.append(field("Collection", select)));
  for (const turn of state.turns) conversation.append(turn.node);
  if (!state.turns.length) conversation.append(emptyConversation(askAgain));

  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey || !e.shiftKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  reset.addEventListener("click", () => {
    state.turns = [];
    conversation.replaceChildren(emptyConversation(askAgain));
    question.focus();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    formError.replaceChildren();
    const q = question.value.trim();
    if (!q) return;
    const body = { query: q, collection: state.collection, top_k: Number(topK.value || 5), include_trace: true };
    if (strategy.value) body.strategy = strategy.value;
    if (topDocs.value) body.top_docs = Number(topDocs.value);
    if (expert.value.trim()) body.expert_knowledge = expert.value.trim();
    const named = documents.value.split(",").map((d) => d.trim()).filter(Boolean);
    if (named.length) body.documents = named.map((d) => (/^\d{1,15}$/.test(d) ? Number(d) : d));
    if (filters.value.trim()) {
      try {
        body.filters = JSON.parse(filters.value);
        if (typeof body.filters !== "object" || Array.isArray(body.filters)) throw new Error("not an object");
      } catch (err) {
        formError.append(alertBox(new ApiError(0, "Filters are not valid JSON",
          'Write an object such as {"company": "Helios Robotics"}.')));
        return;
      }
    }
    body.history = state.turns.filter((t) => t.answer).flatMap((t) => [
      { role: "user", content: t.question }, { role: "assistant", content: t.answer }]);
    if (!state.turns.length) conversation.replaceChildren();
    ask.disabled = true;
    try {
      // the question stays in the box until it was answered: a failed request loses nothing
      if (await runTurn(body, conversation, strategy) && question.value.trim() === q) question.value = "";
    } finally {
      ask.disabled = false;
      question.focus();
    }
  });
  question.focus();
}

/** The first screen: what the collection holds and example questions to click. */
function emptyConversation(askAgain) {
  const summary = el("p", { class: "muted", id: "collection-summary" }, loading("Reading the collection…"));
  const examples = el("div", { class: "examples", id: "examples" });
  const box = el("section", { class: "state first-screen", id: "empty-conversation", "aria-label": "Getting started" },
    el("h2", { text: `Ask the “${state.collection}” collection` }), summary, examples);
  api(`/kb/collections/${encodeURIComponent(state.collection)}/overview`).then((o) => {
    summary.textContent = o.summary;
    if (!o.examples.length) {
      examples.replaceChildren(el("p", {}, "Add documents on the ", el("a", { href: "#/ingest", text: "Ingest page" }), " first."));
      return;
    }
    examples.replaceChildren(el("p", { class: "small muted", text: "Try one of these:" }),
      el("ul", { class: "example-list" }, o.examples.map((x) => el("li", {},
        el("button", { type: "button", class: "example", text: x.question,
          onclick: () => askAgain(x.question, x.strategy) })))));
  }).catch((err) => {
    summary.replaceChildren(err.status === 401 ? "Set an access token (top right) to see this collection."
      : "Type a question above, e.g. about a company's revenue in a given year.");
  });
  return box;
}

const STAGES = [["routing", "Choosing documents"], ["nodes", "Reading sections"], ["answer", "Writing the answer"],
  ["citations", "Citations"]];

/** Why an answer found nothing: the answer's own reason when it gives one, else what the trace shows. */
function notFoundReason(done) {
  const trace = done.trace || {};
  const given = done.not_found || done.not_found_reason || done.reason || trace.not_found_reason || (trace.answer && trace.answer.reason);
  if (given) return given;
  const scope = trace.scope || {};
  if (scope.missing_entities && scope.missing_entities.length) {
    return `No document of this collection is about ${scope.missing_entities.join(", ")}.`;
  }
  if (scope.nothing_found && scope.nothing_found.length) return `Nothing relevant was read in ${scope.nothing_found.join(", ")}.`;
  const cands = (trace.routing && trace.routing.candidates) || [];
  if (!cands.length) return "No document matched the question (with these filters).";
  return "The documents picked did not contain evidence for this question.";
}

/** Run one question as a turn of the conversation; true when it was answered (no error, not stopped). */
async function runTurn(body, conversation, strategySelect) {
  const turnNo = state.turns.length + 1;
  const progress = el("ol", { class: "progress", "aria-label": "Progress" },
    STAGES.map(([key, label]) => el("li", { dataset: { stage: key }, text: label })));
  const routed = el("p", { class: "routed" });
  const answer = el("div", { class: "answer", id: `answer-${turnNo}` });
  const citeList = el("ol", { class: "citations", "aria-label": "Citations" });
  const citeHead = el("h3", { text: "Sources", hidden: true });
  const viewer = el("section", { class: "viewer", id: `viewer-${turnNo}`, hidden: true, "aria-label": "Source page" });
  const traceSlot = el("div", {});
  const factsSlot = el("div", {});
  const errorSlot = el("div", {});
  const notFoundSlot = el("div", {});
  const readAsSlot = el("div", {});
  const nextSlot = el("div", {});
  const controller = new AbortController();
  const stop = el("button", { type: "button", class: "ghost small stop", text: "Stop", "aria-label": `Stop answer ${turnNo}`,
    onclick: () => controller.abort() });
  const side = el("aside", { class: "answer-side", "aria-label": `Sources of answer ${turnNo}` }, viewer, citeHead, citeList);
  const grid = el("div", { class: "answer-grid" },
    el("div", { class: "answer-main" }, el("div", { class: "row between" }, progress, stop), routed, readAsSlot, answer,
      notFoundSlot, factsSlot, errorSlot, nextSlot),
    side);
  // the trace under both columns, the answer's full width: its tables keep their columns (and scroll when narrow)
  const node = el("div", { class: "turn" },
    el("div", { class: "turn-q", text: body.query }),
    el("article", { class: "turn-a", "aria-busy": "true", "aria-label": `Answer ${turnNo}` }, grid, traceSlot));
  const turn = { question: body.query, answer: "", node, citations: new Map(), viewer };
  state.turns.push(turn);
  conversation.append(node);
  node.scrollIntoView({ behavior: "smooth", block: "start" });

  const stage = (key) => {
    let reached = false;
    for (const li of progress.children) {
      if (li.dataset.stage === key) { li.className = "active"; reached = true; }
      else if (!reached) li.className = "done";
    }
  };
  let text = "";
  let citations = [];
  let strategyUsed = body.strategy || "";
  const docNames = new Map();
  stage("routing");
  try {
    await streamQuery(body, (name, data) => {
      if (name === "routing") {
        strategyUsed = data.strategy_used || strategyUsed;
        for (const d of [...(data.candidates || []), ...(data.documents || [])]) docNames.set(d.doc_id, d.name);
        routed.replaceChildren(`${data.strategy_used} routing → `,
          ...(data.documents || []).map((d) => el("span", { class: "chip blue", text: d.name })));
        stage("nodes");
      } else if (name === "nodes") {
        routed.append(el("span", { class: "muted", text: ` · ${plural(data.length, "section")}` }));
        stage("answer");
      } else if (name === "answer") {
        text += data.delta;
        answer.replaceChildren(...linkMarkers(text.trimEnd(), turn));
      } else if (name === "answer_final") {  // the model's streamed words, checked and renumbered
        text = data.text;
        answer.replaceChildren(...linkMarkers(text.trimEnd(), turn));
      } else if (name === "citations") {
        citations = data;
        turn.citations = new Map(citations.map((c) => [c.marker, c]));
        stage("citations");
        citeHead.hidden = citations.length === 0;
        grid.classList.toggle("has-sources", citations.length > 0);
        citeList.replaceChildren(...citations.map((c) => citationItem(c, turn, turnNo)));
        answer.replaceChildren(...linkMarkers(text.trimEnd(), turn));
      } else if (name === "done") {
        for (const li of progress.children) li.className = "done";
        if (data.facts && data.facts.length) factsSlot.replaceChildren(answerFacts(data.facts, citations, turnNo));
        if (data.trace) traceSlot.replaceChildren(traceView(data.trace, docNames, data.documents || []));
        if (!citations.length || data.not_found) notFoundSlot.replaceChildren(notFound(data, body, strategyUsed, strategySelect));
        if (data.read_as) readAsSlot.replaceChildren(readAs(data.read_as, turnNo));
        if (data.suggestions && data.suggestions.length) nextSlot.replaceChildren(suggestions(data.suggestions, turnNo));
      } else if (name === "error") {
        throw new ApiError(data.status, data.title, data.detail);
      }
    }, controller.signal);
    turn.answer = text.trim();
    if (!text.trim()) answer.textContent = "No answer was produced.";
    return true;
  } catch (err) {
    progress.remove();
    if (text.trim()) {  // what arrived stays, marked as cut short
      answer.classList.add("incomplete");
      answer.before(el("p", { class: "chip warn incomplete-note", role: "status",
        text: err.name === "AbortError" ? "Stopped before the answer was complete." : "Incomplete: the answer stopped before it was complete." }));
    }
    if (err.name === "AbortError") errorSlot.replaceChildren(el("p", { class: "muted", role: "status", text: "Stopped." }));
    else {
      errorSlot.replaceChildren(alertBox(err), el("div", { class: "row" },
        el("button", { type: "button", class: "primary small retry", text: "Retry", "aria-label": `Retry question ${turnNo}`,
          onclick: async () => {
            node.remove();
            state.turns = state.turns.filter((t) => t !== turn);
            await runTurn(body, conversation, strategySelect);
          } })));
    }
    if (!text) answer.remove();
    return false;
  } finally {
    stop.remove();
    node.querySelector(".turn-a").setAttribute("aria-busy", "false");
  }
}

/** A follow-up's reading: the question as the earlier turns completed it, what came from which turn, and a button
 * that puts it in the question box to change and ask on its own. */
function readAs(read, turnNo) {
  const taken = (read.inherited || []).map((i) => `${i.part}: ${i.value}`).join(" · ");
  return el("div", { class: "read-as small", id: `read-as-${turnNo}` },
    el("span", { class: "muted", text: "Read as: " }), el("q", { text: read.question }),
    taken ? el("span", { class: "muted", text: ` (from earlier turns: ${taken})` }) : null, " ",
    el("button", { type: "button", class: "ghost small", text: "Change",
      title: "Put this reading in the question box to change it and ask again",
      onclick: () => { const box = document.getElementById("question"); box.value = read.question; box.focus(); } }));
}

/** Follow-up questions the server offers under a computed answer; one click asks it in this conversation. */
function suggestions(list, turnNo) {
  return el("div", { class: "suggestions", id: `next-${turnNo}`, "aria-label": "Follow-up questions" },
    el("span", { class: "small muted", text: "Ask next: " }),
    list.map((q) => el("button", { type: "button", class: "example small", text: q,
      onclick: () => state.askAgain && state.askAgain(q) })));
}

/** A "not found" answer: the reason, and one click to ask again with another strategy. */
function notFound(done, body, used, strategySelect) {
  const others = strategySelect ? [...strategySelect.options].filter((o) => o.value && o.value !== used && o.value !== body.strategy) : [];
  return el("div", { class: "not-found", role: "status" },
    el("strong", { text: "Not found. " }), el("span", { class: "reason", text: notFoundReason(done) }),
    others.length ? el("div", { class: "row retry-with" }, el("span", { class: "small muted", text: "Try again with:" }),
      others.map((o) => el("button", { type: "button", class: "small", text: o.textContent.split(" — ")[0],
        "aria-label": `Ask again with the ${o.textContent.split(" — ")[0]} strategy`,
        onclick: () => state.askAgain && state.askAgain(body.query, o.value) }))) : null);
}

/** The answer as text nodes, with every [n] marker a link to citation n of this turn (once citations are known,
    only those that exist): hover or focus previews its source, activating it opens the page beside the answer. */
function linkMarkers(text, turn) {
  const parts = [];
  let last = 0;
  const turnNo = state.turns.indexOf(turn) + 1;
  for (const m of text.matchAll(/\[(\d{1,3})\]/g)) {
    const n = Number(m[1]);
    if (turn.citations.size && !turn.citations.has(n)) continue;
    parts.push(text.slice(last, m.index));
    parts.push(markerLink(turn, turnNo, n));
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}

function markerLink(turn, turnNo, n) {
  const show = (e) => { const c = turn.citations.get(n); if (c) citePopover.show(e.currentTarget, c); };
  return el("a", { class: "cite", href: `#cite-${turnNo}-${n}`, "aria-label": `Citation ${n}`, text: `${n}`,
    "aria-describedby": "cite-pop",
    onmouseenter: show, onfocus: show, onmouseleave: () => citePopover.hide(), onblur: () => citePopover.hide(),
    onclick: (e) => {
      e.preventDefault();
      citePopover.hide();
      const c = turn.citations.get(n);
      if (c) openSource(c, turn.viewer);
      focusCitation(turnNo, n);
    } });
}

function focusCitation(turnNo, n) {
  const item = document.getElementById(`cite-${turnNo}-${n}`);
  if (!item) return;
  item.scrollIntoView({ behavior: "smooth", block: "nearest" });
  item.classList.remove("flash");
  void item.offsetWidth;
  item.classList.add("flash");
  const btn = item.querySelector("button");
  if (btn) btn.focus({ preventScroll: true });
}

/** "p. 3 · printed 2": the physical page of a citation and, when the page prints one, its own number. */
function citePages(c) {
  const label = pagesLabel(c.unit, c.pages);
  return c.printed_page && c.unit === "page" ? `${label} · printed ${c.printed_page}` : label;
}

function citationItem(c, turn, turnNo) {
  const open = el("button", { type: "button", class: "small", text: c.unit === "page" ? "View page" : "View source",
    "aria-label": `View source of citation ${c.marker}`, onclick: () => openSource(c, turn.viewer) });
  return el("li", { class: "citation", id: `cite-${turnNo}-${c.marker}`, tabindex: "-1" },
    el("span", { class: "num", text: `[${c.marker}]` }),
    el("div", {}, el("div", { class: "doc", text: c.doc_name }),
      el("div", { class: "path" }, `${c.section_path || "—"} · `, el("span", { class: "chip", text: citePages(c) }))),
    open, ...excerptOf(c));
}

/** A citation's passage, clipped to a few lines that show the quoted sentence (scrolled to it when it lies further
 * down), with a toggle to read the whole passage. */
function excerptOf(c) {
  const excerpt = el("div", { class: "excerpt" },
    ...withTables(c.text.replace(/^#{1,6}\s+/gm, "").replace(/\n{2,}/g, "\n").trim(), c.quote));
  const toQuote = () => {
    const mark = excerpt.querySelector("mark.quote");
    excerpt.scrollTop = 0;
    const head = mark && mark.closest("table") ? mark.closest("table").querySelector("thead") : null;  // stays on top
    if (mark) excerpt.scrollTop = Math.max(0, mark.getBoundingClientRect().top - excerpt.getBoundingClientRect().top - 4
      - (head ? head.getBoundingClientRect().height : 0));
  };
  const more = el("button", { type: "button", class: "link more", text: "Show the whole passage",
    "aria-expanded": "false", "aria-label": `Show the whole passage of citation ${c.marker}`, onclick: () => {
      const on = excerpt.classList.toggle("open");
      more.setAttribute("aria-expanded", String(on));
      more.textContent = on ? "Show less" : "Show the whole passage";
      if (on) excerpt.scrollTop = 0;
      else toQuote();
    } });
  requestAnimationFrame(() => {
    toQuote();
    more.hidden = excerpt.scrollHeight <= excerpt.clientHeight + 2;  // all of it shows already
  });
  return [excerpt, more];
}

const SEPARATOR_ROW = /^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

/** The passage with its Markdown tables as tables (the header row over the figures' columns, the row the answer
 * cites marked) and the rest as ``quoted`` text. */
function withTables(text, quote) {
  const lines = text.split("\n");
  const out = [];
  let prose = [];
  const flush = () => { if (prose.length) out.push(...quoted(prose.join("\n"), quote), "\n"); prose = []; };
  for (let i = 0; i < lines.length;) {
    let j = i;
    while (j < lines.length && lines[j].trim().startsWith("|")) j += 1;
    if (j - i >= 2 && lines.slice(i, j).some((ln) => SEPARATOR_ROW.test(ln.trim()))) {
      flush();
      out.push(mdTable(lines.slice(i, j), quote));
      i = j;
    } else {
      prose.push(lines[i]);
      i += 1;
    }
  }
  flush();
  if (out.length && out[out.length - 1] === "\n") out.pop();
  return out;
}

/** Markdown table lines as a <table>: the row over the separator is the header; a row the quote holds is marked. */
function mdTable(lines, quote) {
  const norm = (t) => t.replace(/\s+/g, " ").trim();
  const said = (quote || "").split(" … ").map(norm).filter((q) => q.length > 3);
  const cells = (ln) => ln.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((x) => x.trim());
  const sep = lines.findIndex((ln) => SEPARATOR_ROW.test(ln.trim()));
  const head = sep > 0 ? cells(lines[sep - 1]) : null;
  const body = lines.filter((ln, k) => k !== sep && !(head && k === sep - 1) && !SEPARATOR_ROW.test(ln.trim()));
  const row = (ln) => {
    const marked = said.some((q) => q.includes(norm(ln)) || norm(ln).includes(q));
    const tds = cells(ln).map((x, k) => el(k === 0 ? "th" : "td", k === 0 ? { scope: "row" } : {},
      marked && k === 0 ? el("mark", { class: "quote", text: x }) : x));
    return el("tr", marked ? { class: "quote" } : {}, tds);
  };
  return el("table", { class: "md-table" },
    head ? el("thead", {}, el("tr", {}, head.map((x) => el("th", { scope: "col", text: x })))) : null,
    el("tbody", {}, body.map(row)));
}

/** The passage as text nodes, the parts the answer cites (``quote``, " … "-separated) in <mark>. */
function quoted(text, quote) {
  const parts = (quote || "").split(" … ").map((q) => q.trim()).filter((q) => q.length > 3);
  const spans = [];
  for (const q of parts) {  // sentences are quoted with their line breaks rejoined: any whitespace matches
    const pattern = q.split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("\\s+");
    const m = new RegExp(pattern).exec(text);
    if (m) spans.push([m.index, m.index + m[0].length]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  const out = [];
  let pos = 0;
  for (const [a, b] of spans) {
    if (a < pos) continue;
    if (a > pos) out.push(text.slice(pos, a));
    out.push(el("mark", { class: "quote", text: text.slice(a, b) }));
    pos = b;
  }
  if (pos < text.length) out.push(text.slice(pos));
  return out;
}

/* ------------------------------------------------------------------ citation preview on hover / focus */

const thumbs = new Map();  // "doc/page/chunk" → promise of a blob URL (kept for the tab's life)

function thumbnail(c) {
  const key = `${c.doc_id}/${c.pages[0]}/${c.chunk_id || 0}/${c.quote || ""}`;
  if (!thumbs.has(key)) {
    const q = c.chunk_id ? `?highlight=${encodeURIComponent(c.chunk_id)}${c.quote
      ? `&quote=${encodeURIComponent(c.quote.slice(0, 300))}` : ""}` : "";
    thumbs.set(key, pageImage(`/kb/documents/${c.doc_id}/pages/${c.pages[0]}.png${q}`).then((r) => r.url)
      .catch((err) => { thumbs.delete(key); throw err; }));
  }
  return thumbs.get(key);
}

const citePopover = {
  node: null,
  timer: null,
  show(anchor, c) {
    clearTimeout(this.timer);
    if (!this.node) {
      this.node = el("div", { id: "cite-pop", class: "cite-pop", role: "tooltip" });
      document.body.append(this.node);
    }
    const img = c.unit === "page" ? el("img", { class: "thumb", alt: `Page ${c.pages[0]} of ${c.doc_name}` }) : null;
    this.node.replaceChildren(
      el("div", { class: "doc", text: `[${c.marker}] ${c.doc_name}` }),
      el("div", { class: "path small muted", text: `${c.section_path || "—"} · ${citePages(c)}` }),
      el("div", { class: "pop-body" }, img,
        el("div", { class: "excerpt small", text: c.text.replace(/^#{1,6}\s+/gm, "").replace(/\s+/g, " ").trim().slice(0, 320) })));
    if (img) thumbnail(c).then((url) => { img.src = url; }, () => img.remove());
    const r = anchor.getBoundingClientRect();
    this.node.hidden = false;
    const w = Math.min(420, window.innerWidth - 16);
    this.node.style.width = `${w}px`;
    this.node.style.left = `${Math.max(8, Math.min(r.left + window.scrollX - 20, window.scrollX + window.innerWidth - w - 8))}px`;
    const below = r.bottom + 6;  // below the marker, or above it when the window has no room there
    const height = this.node.offsetHeight || 180;
    const top = below + height > window.innerHeight && r.top - height - 6 > 0 ? r.top - height - 6 : below;
    this.node.style.top = `${top + window.scrollY}px`;
  },
  hide() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => { if (this.node) this.node.hidden = true; }, 120);
  },
};

/* ------------------------------------------------------------------ source viewer (beside the answer) */

const docPages = new Map();  // doc id → promise of its page count (null when unknown)

function pageCount(docId) {
  if (!docPages.has(docId)) {
    docPages.set(docId, api(`/kb/documents/${docId}`).then((d) => d.document.page_count, () => null));
  }
  return docPages.get(docId);
}

/** Fetch the original file (with the token) and open it in a new tab, a PDF at ``page``. */
async function openOriginal(docId, page, btn) {
  btn.disabled = true;
  try {
    const res = await api(`/kb/documents/${docId}/file`, { raw: true, headers: { Accept: "*/*" } });
    const url = URL.createObjectURL(await res.blob());
    const win = window.open(`${url}${page ? `#page=${page}` : ""}`, "_blank", "noopener");
    if (!win) {  // a blocked pop-up: a link to click instead
      btn.after(el("a", { href: url, target: "_blank", rel: "noopener", class: "small", text: "Open the file" }));
    }
  } catch (err) {
    btn.after(alertBox(err));
  } finally {
    btn.disabled = false;
  }
}

/** Show citation ``c`` in the viewer ``box``: its page (zoom, previous/next page, open original, printed page
    number) or its lines. One viewer is open at a time. */
function openSource(c, box) {
  for (const other of document.querySelectorAll(".viewer")) {
    if (other !== box) { other.replaceChildren(); other.hidden = true; }
  }
  preview.clear();
  box.hidden = false;
  const shut = () => { box.replaceChildren(); box.hidden = true; };
  const close = el("button", { type: "button", class: "ghost small", text: "Close ✕", "aria-label": "Close the source",
    onclick: shut });
  (box.closest(".answer-side") || box).onkeydown = (e) => { if (e.key === "Escape" && !box.hidden) shut(); };
  const tools = el("div", { class: "viewer-tools", role: "toolbar", "aria-label": "Page viewer" });
  const body = el("div", { class: "viewer-body" });
  box.replaceChildren(
    el("div", { class: "viewer-head" },
      el("div", {}, el("strong", { class: "viewer-doc", text: c.doc_name }),
        el("div", { class: "muted small", text: `${c.section_path || ""}${c.marker ? ` · citation [${c.marker}]` : ""}` })),
      close),
    tools, body);
  const original = el("button", { type: "button", class: "small", text: "Open original ↗", id: "open-original",
    "aria-label": `Open the original ${c.doc_name}` });
  if (c.unit !== "page") {
    original.addEventListener("click", () => openOriginal(c.doc_id, null, original));
    tools.append(el("span", { class: "small muted", text: pagesLabel(c.unit, c.pages) }), original);
    if (c.chunk_id) showLines(c.doc_id, { highlight: c.chunk_id }, body);
    else showLines(c.doc_id, contextWindow(c.pages[0], c.pages[1]), body, c.pages);
    reveal(box);
    return;
  }
  let page = c.pages[0];
  let zoom = 1;
  let total = null;
  const label = el("span", { class: "page-label", id: "page-label", "aria-live": "polite" });
  const prev = el("button", { type: "button", class: "small", text: "‹", "aria-label": "Previous page" });
  const next = el("button", { type: "button", class: "small", text: "›", "aria-label": "Next page" });
  const out = el("button", { type: "button", class: "small", text: "−", "aria-label": "Zoom out" });
  const zin = el("button", { type: "button", class: "small", text: "+", "aria-label": "Zoom in" });
  const zoomText = el("span", { class: "small muted zoom", text: "100%" });
  const applyZoom = () => {
    zoomText.textContent = `${Math.round(zoom * 100)}%`;
    const img = body.querySelector("img");
    if (img) img.style.width = `${zoom * 100}%`;
    out.disabled = zoom <= 0.5;
    zin.disabled = zoom >= 3;
  };
  const paint = async () => {
    const printed = page === c.pages[0] && c.printed_page ? ` · printed ${c.printed_page}` : "";
    label.textContent = `p. ${page}${total ? ` of ${total}` : ""}${printed}`;
    prev.disabled = page <= 1;
    next.disabled = total !== null && page >= total;
    const cited = page >= c.pages[0] && page <= c.pages[1];
    await showPage(c.doc_id, page, cited ? c.chunk_id : null, body, page === c.pages[0], c.quote || "");
    applyZoom();
  };
  prev.addEventListener("click", () => { if (page > 1) { page -= 1; paint(); } });
  next.addEventListener("click", () => { if (total === null || page < total) { page += 1; paint(); } });
  out.addEventListener("click", () => { zoom = Math.max(0.5, zoom - 0.25); applyZoom(); });
  zin.addEventListener("click", () => { zoom = Math.min(3, zoom + 0.25); applyZoom(); });
  original.addEventListener("click", () => openOriginal(c.doc_id, page, original));
  tools.append(prev, label, next, el("span", { class: "sep", "aria-hidden": "true" }), out, zoomText, zin, original);
  pageCount(c.doc_id).then((n) => { total = n; label.textContent = label.textContent.replace(/^p\. \d+( of \d+)?/, `p. ${page}${n ? ` of ${n}` : ""}`); next.disabled = n !== null && page >= n; });
  paint();
  reveal(box);
}

/** Bring an opened viewer into sight: the top of its (scrolling) sources column, and the column in the window. */
function reveal(box) {
  const side = box.closest(".answer-side");
  if (side) side.scrollTop = 0;
  box.scrollIntoView({ block: "nearest" });
}

/* ------------------------------------------------------------------ source preview */

const preview = {
  dialog: () => $("#preview"),
  urls: [],
  clear() { for (const u of this.urls) URL.revokeObjectURL(u); this.urls = []; },
};

async function showPage(docId, page, chunkId, body, citedHere = true, quote = "") {
  const shown = body.querySelector("img.page-img");  // one page image per view: the one it replaces is freed
  if (shown && shown.src.startsWith("blob:")) URL.revokeObjectURL(shown.src);
  body.dataset.page = String(page);  // the page asked last: an earlier answer arriving later is dropped
  body.replaceChildren(loading(`Rendering page ${page}…`));
  const q = chunkId ? `?highlight=${encodeURIComponent(chunkId)}${quote ? `&quote=${encodeURIComponent(quote.slice(0, 300))}` : ""}` : "";
  try {
    const { url, top, found } = await pageImage(`/kb/documents/${docId}/pages/${page}.png${q}`);
    if (body.dataset.page !== String(page)) { URL.revokeObjectURL(url); return; }  // a later page was asked meanwhile
    preview.urls.push(url);  // the dialog frees the last ones when it closes
    const img = el("img", { class: "page-img", src: url, alt: `Page ${page}${chunkId ? ", cited text highlighted" : ""}`,
      id: "page-image" });
    if (top !== null) {  // scroll the highlighted text into view
      img.addEventListener("load", () => {
        const scroller = body.closest(".preview-body") || body;
        scroller.scrollTop = Math.max(0, img.offsetTop - scroller.offsetTop + top * img.height - 80);
      }, { once: true });
    }
    body.replaceChildren(chunkId && citedHere && found === false ? el("p", { class: "chip warn unmarked", role: "status",
      text: "The cited passage was not found on this page as the file reads now: nothing is highlighted." }) : "", img);
  } catch (err) {
    body.replaceChildren(alertBox(err));
  }
}

/** Lines of a text source; the server marks a highlighted chunk's lines, ``mark`` ([a, b]) marks lines a..b. */
async function showLines(docId, params, body, mark) {
  body.replaceChildren(loading("Loading lines…"));
  const marked = (n) => Boolean(mark) && n >= mark[0] && n <= mark[1];
  try {
    const data = await api(`/kb/documents/${docId}/lines?${new URLSearchParams(params)}`);
    const box = el("div", { class: "lines", id: "source-lines", role: "region", "aria-label": "Source lines" },
      data.lines.map((ln) => el("div", { class: ln.cited || marked(ln.n) ? "cited" : null },
        el("span", { text: ln.n }), el("span", { text: ln.text }))));
    body.replaceChildren(el("p", { class: "muted small", text: `${data.start}–${data.end} of ${data.total}` }), box);
    const first = box.querySelector(".cited");
    if (first) first.scrollIntoView({ block: "center" });
  } catch (err) {
    body.replaceChildren(alertBox(err));
  }
}

const PAGE_BUTTONS = 12;  // a span of more pages gets a pager (previous, a page number, next), not a button each

/** Pages ``first``..``last`` to pick from: a button each, or for a long span (a 3,000-page section) a pager that
 * loads one page at a time. */
function pageButtons(nav, first, last, onPick) {
  nav.replaceChildren();
  if (last <= first) return;
  if (last - first + 1 <= PAGE_BUTTONS) {
    nav.append(el("span", { class: "muted small", text: "Page" }));
    for (let p = first; p <= last; p++) {
      nav.append(el("button", { type: "button", class: "small", text: p, "aria-label": `Page ${p}`, onclick: (e) => {
        for (const b of nav.querySelectorAll("button")) b.removeAttribute("aria-current");
        e.currentTarget.setAttribute("aria-current", "true");
        onPick(p);
      } }));
    }
    nav.querySelector("button").setAttribute("aria-current", "true");
    return;
  }
  let at = first;
  const number = el("input", { type: "number", class: "page-number", min: first, max: last, value: first,
    "aria-label": "Page number", inputmode: "numeric" });
  const go = (p) => {
    at = Math.min(last, Math.max(first, Math.round(p) || first));
    number.value = at;
    prev.disabled = at === first;
    next.disabled = at === last;
    onPick(at);
  };
  const prev = el("button", { type: "button", class: "small", text: "←", "aria-label": "Previous page", disabled: true,
    onclick: () => go(at - 1) });
  const next = el("button", { type: "button", class: "small", text: "→", "aria-label": "Next page",
    onclick: () => go(at + 1) });
  number.addEventListener("change", () => go(Number(number.value)));
  nav.append(el("span", { class: "muted small", text: "Page" }), prev, number, next,
    el("span", { class: "muted small page-span", text: `of ${first}–${last}` }));
}

/** Query parameters of /lines for lines a..b (the server returns at most 400). */
function lineWindow(a, b) {
  return { start: a, count: Math.max(1, Math.min(400, b - a + 1)) };
}

/** Lines a..b with some lines of context either side (a cited statement line reads with its heading). */
function contextWindow(a, b, context = 15) {
  const start = Math.max(1, a - context);
  return { start, count: Math.max(1, Math.min(400, b + context - start + 1)) };
}

function openPreview(c) {
  const dialog = preview.dialog();
  preview.clear();
  $("#preview-title").textContent = c.doc_name;
  $("#preview-sub").textContent = `${c.section_path || ""} · ${pagesLabel(c.unit, c.pages)}${c.marker ? ` · citation [${c.marker}]` : ""}`;
  const body = $("#preview-body");
  const nav = $("#preview-nav");
  if (c.unit === "page") {
    pageButtons(nav, c.pages[0], c.pages[1],
      (p) => showPage(c.doc_id, p, c.chunk_id, body, p === c.pages[0], c.quote || ""));
    showPage(c.doc_id, c.pages[0], c.chunk_id, body, true, c.quote || "");
  } else {
    nav.replaceChildren();
    if (c.chunk_id) showLines(c.doc_id, { highlight: c.chunk_id }, body);
    else showLines(c.doc_id, contextWindow(c.pages[0], c.pages[1]), body, c.pages);  // e.g. a fact's line
  }
  if (!dialog.open) dialog.showModal();
}

/* ------------------------------------------------------------------ trace */

function table(headers, rows, rowClass) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map(([h, cls]) => el("th", { class: cls, scope: "col", text: h })))),
    el("tbody", {}, rows.map((r, i) => el("tr", { class: rowClass ? rowClass(i) : null },
      r.map((cell, j) => el("td", { class: headers[j][1] }, cell))))));
}

function traceSection(title, ...content) {
  return el("section", { class: "trace-section" }, el("h4", { text: title }), ...content);
}

function traceView(trace, docNames, documents) {
  const name = (id) => docNames.get(id) || `document ${id}`;
  const chosen = new Set(documents.map((d) => d.doc_id));
  const timings = trace.timings_ms || {};
  const llm = trace.llm || {};
  const total = timings.total;
  const summary = [`Trace · ${trace.strategy_used || ""}`, total !== undefined ? `${Math.round(total)} ms` : null,
    llm.calls !== undefined ? plural(llm.calls, "LLM call") : null].filter(Boolean).join(" · ");
  const parts = [];
  const scope = trace.scope || {};
  if (scope.kind) {
    parts.push(traceSection("Question scope", el("dl", { class: "kv" },
      el("dt", { text: "kind" }), el("dd", { text: scope.kind }),
      el("dt", { text: "reason" }), el("dd", { text: scope.reason || "—" }))));
  }
  const follow = trace.follow_up;
  if (follow && follow.inherited && follow.inherited.length) {
    parts.push(traceSection("Follow-up", el("dl", { class: "kv" },
      el("dt", { text: "asked as" }), el("dd", { text: follow.question }),
      follow.inherited.flatMap((i) => [el("dt", { text: i.part }),
        el("dd", { text: `${i.value} (${plural(i.turns_back, "turn")} back${i.source === "assistant" ? ", from the answer" : ""})` })]))));
  }
  const cands = (trace.routing && trace.routing.candidates) || [];
  parts.push(traceSection(`Routing candidates (${cands.length})`, cands.length ? table(
    [["Document"], ["Score", "num"], ["Why"]],
    cands.map((c) => [el("span", {}, c.name, chosen.has(c.doc_id) ? el("span", { class: "chip blue", text: " routed" }) : null),
      fmt(c.score), c.why || "—"]),
    (i) => (chosen.has(cands[i].doc_id) ? "chosen" : null)) : el("p", { class: "empty", text: "No candidates." })));
  const conds = (trace.routing && trace.routing.conditions) || [];
  const notes = (trace.routing && trace.routing.notes) || [];
  if (conds.length || notes.length) {
    parts.push(traceSection("Routing conditions and notes", el("ul", {},
      conds.map((c) => el("li", { text: `${c.key} ${c.op} ${JSON.stringify(c.value)}` })),
      notes.map((n) => el("li", { class: "muted", text: n })))));
  }
  const nodes = trace.nodes || [];
  parts.push(traceSection(`Chosen sections (${nodes.length})`, nodes.length ? table(
    [["Document"], ["Section"], ["Sub-query"], ["Score", "num"], ["Reason"]],
    nodes.map((n) => [name(n.doc_id), n.section_path || n.title, n.sub_query || "—", fmt(n.score), n.reason || "—"]))
    : el("p", { class: "empty", text: "No sections chosen." })));
  const chunks = trace.chunks || [];
  parts.push(traceSection(`Evidence chunks (${chunks.length})`, chunks.length ? table(
    [["Chunk", "num"], ["Document"], ["Page", "num"], ["Source"], ["Dense", "num"], ["BM25", "num"], ["Fused", "num"],
      ["Score", "num"], ["Rerank", "num"]],
    chunks.map((c) => [c.chunk_id, name(c.doc_id), c.page ?? "—", c.source, fmt(c.dense), fmt(c.bm25), fmt(c.fused),
      fmt(c.score), c.rerank === null || c.rerank === undefined ? "—" : fmt(c.rerank)]))
    : el("p", { class: "empty", text: "No chunks." })));
  const keys = Object.keys(timings).filter((k) => k !== "total");
  const max = Math.max(1, ...keys.map((k) => timings[k]));
  parts.push(traceSection("Timings", el("div", { class: "bars" },
    keys.flatMap((k) => [el("span", { text: k.replace(/_/g, " ") }),
      el("div", { class: "bar", style: null, dataset: { w: timings[k] / max } }),
      el("span", { class: "num", text: `${Math.round(timings[k])} ms` })]),
    total !== undefined ? [el("strong", { text: "total" }), el("span"), el("strong", { class: "num", text: `${Math.round(total)} ms` })] : [])));
  const usage = Object.entries(llm);
  parts.push(traceSection("LLM usage", usage.length ? el("dl", { class: "kv" },
    usage.flatMap(([k, v]) => [el("dt", { text: k.replace(/_/g, " ") }), el("dd", { text: typeof v === "object" ? JSON.stringify(v) : v })]))
    : el("p", { class: "empty", text: "No LLM calls (offline mode)." })));
  parts.push(el("p", { class: "muted small", text: `Synthesis: ${trace.synthesis || "—"} · ranking: ${trace.ranking || "—"}${trace.rerank ? ` · rerank: ${trace.rerank}` : ""}` }));
  const details = el("details", { class: "trace" }, el("summary", { text: summary }), ...parts);
  // bar widths via CSSOM (style attributes would need 'unsafe-inline' in the CSP)
  for (const bar of details.querySelectorAll(".bar")) bar.style.width = `${Math.max(1, Number(bar.dataset.w) * 100)}%`;
  return details;
}

/* ------------------------------------------------------------------ statement facts */

const STATEMENTS = [["income", "Income statement"], ["comprehensive_income", "Statement of comprehensive income"],
  ["balance", "Balance sheet"], ["cash_flow", "Cash flow statement"], ["equity", "Statement of equity"]];
const STATEMENT_LABEL = new Map(STATEMENTS);
const SCALE_NAMES = new Map([[1e3, "thousands"], [1e4, "万"], [1e6, "millions"], [1e8, "亿"], [1e9, "billions"]]);

const capitalized = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/** "FY ended 2023-12-31", "at 2024-03-31" (a balance), "3 months to 2024-03-31". */
function factPeriod(f) {
  if (!f.months) return `at ${f.period_end}`;
  if (f.months === 12) return `FY ended ${f.period_end}`;
  return `${plural(f.months, "month")} to ${f.period_end}`;
}

/** The figure as printed, with the statement's scale: "1,299 (thousands)". */
function factValue(f) {
  const scale = SCALE_NAMES.get(f.scale);
  return `${f.printed}${scale ? ` (${scale})` : ""}`;
}

/** A fact's source as a citation, for the page or lines preview. */
function factSource(doc, f) {
  if (f.page === null && f.line === null) return null;
  const unit = f.page !== null ? "page" : "line";
  const at = f.page !== null ? f.page : f.line;
  return { doc_id: doc.id, doc_name: doc.name, unit, pages: [at, at], chunk_id: null,
    section_path: `${STATEMENT_LABEL.get(f.statement) || f.statement} › ${f.line_item}` };
}

/** The document's facts grouped by statement: measures of the vocabulary, or every line with the toggle. */
function factsView(doc, rows, concepts) {
  const named = rows.filter((r) => r.concept);
  const all = el("input", { id: "facts-all", name: "all_lines", type: "checkbox" });
  const body = el("div", { id: "facts-body" });
  const label = (r) => (r.concept ? capitalized(concepts.get(r.concept) || r.concept.replace(/_/g, " ")) : "—");
  const paint = () => {
    const shown = all.checked ? rows : named;
    if (!shown.length) {
      body.replaceChildren(el("p", { class: "empty",
        text: `None of the ${plural(rows.length, "figure")} is a measure of the vocabulary. Show all lines to see them.` }));
      return;
    }
    const order = [...STATEMENTS.map(([k]) => k), ...new Set(shown.map((r) => r.statement))];
    body.replaceChildren(...[...new Set(order)].flatMap((kind) => {
      const group = shown.filter((r) => r.statement === kind);
      if (!group.length) return [];
      const title = STATEMENT_LABEL.get(kind) || kind.replace(/_/g, " ");
      const t = table([["Line item"], ["Measure"], ["Period"], ["Value", "num"], ["Unit"], ["Source"]], group.map((r) => {
        const src = factSource(doc, r);
        return [
          r.line_item,
          el("span", { class: r.concept ? null : "muted", text: label(r) }),
          el("span", { title: r.period_label || null, text: factPeriod(r) }),
          el("span", { title: `${r.value} ${r.unit}`, text: factValue(r) }),
          el("span", { class: "muted", text: r.unit }),
          src ? el("button", { type: "button", class: "link small fact-src", text: pagesLabel(src.unit, src.pages),
            "aria-label": `View ${r.line_item} on ${pagesLabel(src.unit, src.pages)}`, onclick: () => openPreview(src) }) : "—",
        ];
      }));
      t.classList.add("facts-table");
      return [el("section", { class: "facts-group", "aria-label": title },
        el("h3", { text: `${title} (${group.length})` }), t)];
    }));
  };
  all.addEventListener("change", paint);
  if (!rows.length) {
    return stateBox("empty", "No financial facts", "No statement facts were found in this document.");
  }
  paint();
  return el("div", {},
    el("div", { class: "row between facts-head" },
      el("p", { class: "muted small", text: `${named.length} of ${plural(rows.length, "figure")} (one per line item and period) are measures of the vocabulary.` }),
      el("label", { class: "check", for: "facts-all" }, all, `Show all lines (${rows.length})`)),
    body);
}

/** The citation of a fact the answer used: the one its marker names when it stands on the fact's line or page,
    else the one that does (markers are renumbered in reading order after the facts table is made). */
function factCitation(f, citations) {
  const unit = f.page !== null ? "page" : "line";
  const at = f.page !== null ? f.page : f.line;
  const here = citations.filter((c) => c.doc_id === f.doc_id && c.unit === unit && c.pages[0] === at);
  return here.find((c) => c.marker === f.marker)
    || here.find((c) => c.text.split("\n")[0].toLowerCase().includes(f.line_item.toLowerCase()))
    || here[0] || null;
}

/** A marker like the answer's own: a link to citation c of this turn (a dash without one). */
function citeLink(c, turnNo) {
  if (!c) return el("span", { class: "muted", text: "—" });
  return el("a", { class: "cite", href: `#cite-${turnNo}-${c.marker}`, "aria-label": `Citation ${c.marker}`,
    text: `${c.marker}`, onclick: (e) => { e.preventDefault(); focusCitation(turnNo, c.marker); } });
}

/** Under an answer computed from facts: the facts it used, each with the marker that cites it. */
function answerFacts(facts, citations, turnNo) {
  const t = table([["Company"], ["Measure"], ["Period"], ["Value", "num"], ["Source", "num"]], facts.map((f) => [
    el("div", {}, f.entity || f.doc_name, el("div", { class: "muted small", text: f.doc_name })),
    el("div", {}, capitalized(f.label), f.line_item && f.line_item.toLowerCase() !== f.label.toLowerCase()
      ? el("div", { class: "muted small", text: `as printed: ${f.line_item}` }) : null),
    factPeriod(f),
    el("span", { title: `${f.value} ${f.unit}` }, factValue(f), el("span", { class: "muted", text: ` ${f.unit}` })),
    citeLink(factCitation(f, citations), turnNo),
  ]));
  t.classList.add("facts-table");
  return el("section", { class: "answer-facts", "aria-label": "Statement facts used" },
    el("h3", { text: "Computed from these statement facts" }), t);
}

/* ------------------------------------------------------------------ documents */

async function renderDocuments(view) {
  const list = el("div", {}, loading("Loading documents…"));
  const colSlot = el("div", { class: "col-select" });
  const newCol = el("button", { type: "button", class: "small", id: "new-collection", text: "New collection",
    "aria-haspopup": "dialog" });
  view.replaceChildren(
    el("div", { class: "page-head" },
      el("div", {}, el("h1", { text: "Documents" }),
        el("p", { class: "muted", text: "Every document with its metadata and the tree it is searched by." })),
      el("div", { class: "row head-tools" }, colSlot, newCol)),
    list);
  const load = async () => {
    list.replaceChildren(loading("Loading documents…"));
    try {
      const docs = await api(`/kb/documents?collection=${encodeURIComponent(state.collection)}&limit=1000`);
      list.replaceChildren(docs.length ? documentTable(docs, load) : stateBox("empty", "No documents yet",
        "This collection is empty. Add files on the Ingest page.", el("p", {}, el("a", { href: "#/ingest", text: "Go to Ingest →" }))));
    } catch (err) {
      list.replaceChildren(err.status === 404 ? stateBox("error", "Collection not found", err.detail) : alertBox(err));
    }
  };
  const select = await collectionSelect("doc-collection", load);
  colSlot.append(field("Collection", select));
  newCol.addEventListener("click", () => newCollectionDialog(async (name) => {
    state.collection = name;
    sessionStorage.setItem("kb.collection", name);
    renderDocuments(view);
  }));
  await load();
}

/** A dialog that creates a collection (admin); ``done(name)`` after it was created. */
function newCollectionDialog(done) {
  const name = el("input", { id: "collection-name", name: "name", required: true, pattern: "[A-Za-z0-9_.\\-]{1,64}",
    autocomplete: "off", placeholder: "e.g. filings-2024" });
  const desc = el("input", { id: "collection-description", name: "description", autocomplete: "off",
    placeholder: "optional: what it holds" });
  const msg = el("div", {});
  const dialog = el("dialog", { class: "new-collection", "aria-labelledby": "new-collection-title" });
  const form = el("form", { class: "dialog-body", method: "dialog" },
    el("h2", { id: "new-collection-title", text: "New collection" }),
    field("Name", name, "Letters, digits, '_', '.' and '-'."), field("Description", desc), msg,
    el("div", { class: "row end" },
      el("button", { type: "button", class: "ghost", text: "Cancel", onclick: () => dialog.close() }),
      el("button", { type: "submit", class: "primary", text: "Create" })));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api("/kb/collections", { method: "POST", json: { name: name.value.trim(), description: desc.value.trim() } });
      dialog.close();
      done(name.value.trim());
    } catch (err) {
      msg.replaceChildren(alertBox(err));
    }
  });
  dialog.append(form);
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  name.focus();
}

function metaChips(metadata) {
  return el("div", { class: "meta" }, Object.entries(metadata || {}).map(([k, v]) =>
    el("span", { class: "chip", text: `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}` })));
}

const DOC_TYPES = { annual_report: "annual report", "10k": "10-K", "10q": "10-Q quarterly report", "8k": "8-K" };

/** A document's title for people: its own title when it names the company, else company, type and period
    ("Northwind Energy annual report FY2023", not a first heading like "Letter to shareholders"). */
function displayTitle(d) {
  const m = d.metadata || {};
  const company = m.company ? String(m.company) : "";
  const title = (d.title || "").trim();
  if (!company || (title.toLowerCase().includes(company.toLowerCase()) && title !== company)) return title || d.name;
  const type = DOC_TYPES[m.doc_type] || (m.doc_type ? String(m.doc_type).replace(/_/g, " ") : "");
  return [company, type, m.period || m.fiscal_year].filter(Boolean).join(" ");
}

const FILE_TYPES = { pdf: "PDF", markdown: "Markdown", text: "Text", docx: "Word", html: "HTML" };

/** Documents with search, filters (company, year, type, status) and sortable columns. */
function documentTable(docs, reload) {
  const values = (key) => [...new Set(docs.map((d) => (d.metadata || {})[key]).filter((v) => v !== undefined && v !== null && v !== ""))]
    .map(String).sort();
  const search = el("input", { id: "doc-search", type: "search", name: "search", placeholder: "Name, title, description, metadata…",
    autocomplete: "off" });
  const pick = (id, label, options) => {
    const s = el("select", { id, name: id }, el("option", { value: "", text: `All` }),
      options.map(([v, t]) => el("option", { value: v, text: t })));
    return [s, field(label, s)];
  };
  const [company, companyField] = pick("filter-company", "Company", values("company").map((v) => [v, v]));
  const [year, yearField] = pick("filter-year", "Year", values("fiscal_year").map((v) => [v, v]));
  const [type, typeField] = pick("filter-type", "Type", [...new Set(docs.map((d) => d.file_type))].sort()
    .map((v) => [v, FILE_TYPES[v] || v]));
  const [status, statusField] = pick("filter-status", "Status", [...new Set(docs.map((d) => d.status))].sort()
    .map((v) => [v, v]));
  const count = el("p", { class: "muted small", id: "doc-count", role: "status" });
  const body = el("tbody", {});
  const sort = { key: "name", dir: 1 };
  const columns = [["name", "Document", "name"], ["company", "Company"], ["year", "Year", "num"], ["description", "Description", "desc"],
    ["size", "Size", "num"], ["status", "Status"], ["tree", "Tree"], ["", ""]];
  const keyOf = {
    name: (d) => displayTitle(d).toLowerCase(), company: (d) => String((d.metadata || {}).company || "").toLowerCase(),
    year: (d) => Number((d.metadata || {}).fiscal_year || 0), description: (d) => (d.description || "").toLowerCase(),
    size: (d) => d.page_count, status: (d) => d.status, tree: (d) => d.tree_mode || "",
  };
  const heads = columns.map(([key, label, cls]) => {
    if (!key) return el("th", { scope: "col" }, el("span", { class: "sr-label", text: "Actions" }));
    const btn = el("button", { type: "button", class: "sort", text: label, onclick: () => {
      sort.dir = sort.key === key ? -sort.dir : 1;
      sort.key = key;
      paint();
    } });
    return el("th", { scope: "col", class: cls, dataset: { key } }, btn);
  });
  const row = (d) => {
    const desc = d.description || "—";
    const long = desc.length > 160;
    const descBox = el("div", { class: long ? "clamp" : null, text: desc });
    const more = long ? el("button", { type: "button", class: "link small", text: "more", "aria-expanded": "false",
      "aria-label": `Show the whole description of ${d.name}`, onclick: (e) => {
        const open = e.currentTarget.getAttribute("aria-expanded") !== "true";
        e.currentTarget.setAttribute("aria-expanded", String(open));
        e.currentTarget.textContent = open ? "less" : "more";
        descBox.classList.toggle("clamp", !open);
      } }) : null;
    const m = d.metadata || {};
    return el("tr", {},
      el("td", { class: "name" }, el("a", { href: `#/documents/${d.id}`, text: displayTitle(d) }),
        el("div", { class: "muted small file-name", text: d.name }), metaChips(d.metadata)),
      el("td", { text: m.company || "—" }),
      el("td", { class: "num", text: m.fiscal_year || "—" }),
      el("td", { class: "desc" }, descBox, more),
      el("td", { class: "num" }, `${d.page_count}`, el("span", { class: "muted", text: ` ${sizeUnit(d.file_type)}` }),
        el("div", { class: "muted small", text: FILE_TYPES[d.file_type] || d.file_type })),
      el("td", {}, el("span", { class: `chip ${d.status === "ready" ? "ok" : "warn"}`, text: d.status })),
      el("td", {}, el("span", { class: "chip", text: d.tree_mode || "—" })),
      el("td", {}, el("button", { type: "button", class: "danger small", text: "Delete", "aria-label": `Delete ${d.name}`,
        onclick: async (e) => {
          if (!window.confirm(`Delete “${d.name}” and its tree, chunks and embeddings?`)) return;
          const btn = e.currentTarget;
          btn.disabled = true;
          try {
            await api(`/kb/documents/${d.id}`, { method: "DELETE" });
            await reload();
            refreshCollections();
          } catch (err) {
            btn.disabled = false;
            btn.closest("td").append(alertBox(err));
          }
        } })));
  };
  const paint = () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = docs.filter((d) => {
      const m = d.metadata || {};
      if (company.value && String(m.company) !== company.value) return false;
      if (year.value && String(m.fiscal_year) !== year.value) return false;
      if (type.value && d.file_type !== type.value) return false;
      if (status.value && d.status !== status.value) return false;
      const hay = `${d.name} ${d.title} ${displayTitle(d)} ${d.description} ${JSON.stringify(m)}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    }).sort((a, b) => {
      const x = keyOf[sort.key](a);
      const y = keyOf[sort.key](b);
      return (x < y ? -1 : x > y ? 1 : 0) * sort.dir;
    });
    for (const th of heads) {
      if (th.dataset.key) th.setAttribute("aria-sort", th.dataset.key === sort.key ? (sort.dir > 0 ? "ascending" : "descending") : "none");
    }
    body.replaceChildren(...shown.map(row));
    count.textContent = shown.length === docs.length ? plural(docs.length, "document")
      : `${shown.length} of ${plural(docs.length, "document")}`;
  };
  for (const input of [company, year, type, status]) input.addEventListener("change", paint);
  search.addEventListener("input", paint);
  paint();
  const t = el("table", { class: "doc-table" }, el("thead", {}, el("tr", {}, heads)), body);
  return el("div", { class: "panel" },
    el("div", { class: "grid doc-filters" }, field("Search", search), companyField, yearField, typeField, statusField),
    count, el("div", { class: "table-scroll" }, t));
}

async function renderDocument(view, id, tab) {
  view.replaceChildren(loading("Loading document…"));
  const factsRequest = api(`/kb/documents/${id}/facts`).catch((err) => err);
  const conceptsRequest = capabilities().then((caps) => new Map(caps.concepts.map((c) => [c.name, c.label])),
    () => new Map());
  let detail;
  try {
    detail = await api(`/kb/documents/${id}`);
  } catch (err) {
    view.replaceChildren(err.status === 404 || err.status === 400
      ? stateBox("error", "Document not found", `There is no document ${id}. It may have been deleted.`,
        el("p", {}, el("a", { href: "#/documents", text: "← All documents" })))
      : alertBox(err));
    return;
  }
  const d = detail.document;
  const isPdf = d.file_type === "pdf";
  const pane = el("div", { class: "panel sticky", id: "node-pane" },
    stateBox("empty", "Pick a section", `Click a section of the outline to see its ${sizeUnit(d.file_type)}.`));
  const outline = buildOutline(detail.tree, (node, button) => {
    for (const b of view.querySelectorAll(".node-btn[aria-pressed='true']")) b.setAttribute("aria-pressed", "false");
    button.setAttribute("aria-pressed", "true");
    showNode(d, node, pane);
  });
  // every page of a PDF, one at a time (a 3,000-page report: a pager, each page rendered when asked)
  const pagesNav = el("div", { class: "preview-nav" });
  const pagesBody = el("div", {});
  const pagesPanel = el("div", { class: "panel", id: "pages-pane" }, el("h2", { text: "Pages" }), pagesNav, pagesBody);
  let pagesOpen = false;
  const openPages = () => {
    if (pagesOpen) return;
    pagesOpen = true;
    pageButtons(pagesNav, 1, d.page_count, (p) => showPage(d.id, p, null, pagesBody));
    showPage(d.id, 1, null, pagesBody);
  };
  const factsPanel = el("div", { class: "panel", id: "facts-pane" }, el("h2", { text: "Financial facts" }),
    el("p", { class: "muted small", text: "Statement line items read at ingest, per period column. Open a source to see the line highlighted." }),
    loading("Loading facts…"));
  const tabs = tabSet("Document views", [
    ["outline", "Outline", el("div", { class: "doc-layout" },
      el("div", { class: "panel" }, el("h2", { text: "Outline" }),
        detail.tree.length ? outline : el("p", { class: "empty", text: "This document has no tree." })),
      pane)],
    ["facts", "Financial facts", factsPanel],
    ...(isPdf && d.page_count > 0 ? [["pages", "Pages", pagesPanel]] : []),
  ], ["facts", "pages"].includes(tab) ? tab : "outline", (name) => {
    history.replaceState(null, "", `#/documents/${d.id}${name === "outline" ? "" : `/${name}`}`);
    if (name === "pages") openPages();
  });
  const askThis = el("button", { type: "button", class: "ghost", id: "ask-this", text: "Ask this document",
    title: "Ask a question of this document only (routing skipped)",
    onclick: () => { state.askDocuments = [d.name]; location.hash = "#/ask"; } });
  view.replaceChildren(
    el("p", {}, el("a", { href: "#/documents", text: "← All documents" })),
    el("div", { class: "page-head" }, el("div", {}, el("h1", { text: displayTitle(d) }),
      el("p", { class: "muted", text: `${d.name} · ${d.page_count} ${sizeUnit(d.file_type)} · ${d.tree_mode} tree · ${plural(d.node_count, "node")} · ${plural(d.chunk_count, "chunk")}` })),
      askThis),
    el("div", { class: "panel" }, el("p", { text: d.description || "No description." }), metaChips(d.metadata),
      entityNote(detail.entity),
      d.warnings && d.warnings.length ? el("ul", { class: "small muted" }, d.warnings.map((w) => el("li", { text: w }))) : null),
    tabs.node);
  if (tab === "pages" && isPdf) openPages();
  const [rows, concepts] = await Promise.all([factsRequest, conceptsRequest]);
  factsPanel.lastChild.replaceWith(rows instanceof Error ? alertBox(rows) : factsView(d, rows, concepts));
  if (!(rows instanceof Error)) tabs.count("facts", rows.filter((r) => r.concept).length);
}

/** Which company names routing and facts read as this document's company, and why ("Amcor PLC" with "Amcor"). */
function entityNote(entity) {
  if (!entity || entity.names.length < 2) return null;
  return el("p", { class: "small muted", id: "entity-note",
    text: `Read as one company, ${entity.name}: ${entity.names.join(", ")} (${entity.joined.join("; ")}). ` +
      "Set \"entity\" in a document's metadata to join or separate companies." });
}

/** WAI-ARIA tabs: ``panes`` [name, label, content]; arrow keys, Home and End move between the tabs. */
function tabSet(label, panes, selected, onSelect) {
  const buttons = new Map();
  const panels = new Map();
  const select = (name, focus) => {
    for (const [key, btn] of buttons) {
      const on = key === name;
      btn.setAttribute("aria-selected", String(on));
      btn.tabIndex = on ? 0 : -1;
      panels.get(key).hidden = !on;
      if (on && focus) btn.focus();
    }
  };
  const names = panes.map(([name]) => name);
  const list = el("div", { class: "tabs", role: "tablist", "aria-label": label }, panes.map(([name, text]) => {
    const btn = el("button", { type: "button", role: "tab", id: `tab-${name}`, "aria-controls": `tabpanel-${name}`,
      class: "tab", dataset: { label: text }, text,
      onclick: () => { select(name, false); if (onSelect) onSelect(name); },
      onkeydown: (e) => {
        const i = names.indexOf(name);
        const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: names.length - 1 }[e.key];
        if (to === undefined) return;
        e.preventDefault();
        const next = names[(to + names.length) % names.length];
        select(next, true);
        if (onSelect) onSelect(next);
      } });
    buttons.set(name, btn);
    return btn;
  }));
  const node = el("div", {}, list, panes.map(([name, , content]) => {
    const panel = el("div", { role: "tabpanel", id: `tabpanel-${name}`, "aria-labelledby": `tab-${name}` }, content);
    panels.set(name, panel);
    return panel;
  }));
  select(selected, false);
  return { node, count: (name, n) => { buttons.get(name).textContent = `${buttons.get(name).dataset.label} (${n})`; } };
}

function buildOutline(nodes, onPick) {
  const children = new Map();
  for (const n of nodes) {
    const key = n.parent_id || "";
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(n);
  }
  const build = (parent, depth) => {
    const kids = (children.get(parent) || []).sort((a, b) => a.ordinal - b.ordinal);
    if (!kids.length) return null;
    return el("ul", { class: depth === 0 ? "outline" : null, "aria-label": depth === 0 ? "Document outline" : null },
    kids.map((n) => {
      const sub = build(n.node_id, depth + 1);
      const btn = el("button", { type: "button", class: "node-btn", "aria-pressed": "false", text: n.title,
        onclick: (e) => onPick(n, e.currentTarget) });
      const toggle = el("button", { type: "button", class: "toggle", text: sub ? (depth < 1 ? "▾" : "▸") : "",
        "aria-label": sub ? `Expand ${n.title}` : null, "aria-expanded": sub ? String(depth < 1) : null, tabindex: sub ? null : "-1",
        onclick: (e) => {
          const open = e.currentTarget.getAttribute("aria-expanded") !== "true";
          e.currentTarget.setAttribute("aria-expanded", String(open));
          e.currentTarget.textContent = open ? "▾" : "▸";
          if (sub) sub.hidden = !open;
        } });
      if (sub) sub.hidden = depth >= 1;
      return el("li", {},
        el("div", { class: "node-row" }, toggle, btn, el("span", { class: "pages", text: pagesLabel(n.unit, [n.start_index, n.end_index]) })),
        n.summary ? el("p", { class: "node-summary", text: ((t) => (t.length > 220 ? `${t.slice(0, 220)}…` : t))(readable(n.summary)) }) : null,
        sub);
    }));
  };
  return build("", 0) || el("p", { class: "empty", text: "Empty tree." });
}

/** A summary as people read it: no dot leaders of a contents page ("Revenue ........ 12" → "Revenue 12"). */
function readable(text) {
  return (text || "").replace(/(?:\s*[.·…]\s*){4,}/g, " … ").replace(/[ \t]{2,}/g, " ").trim();
}

function showNode(doc, node, pane) {
  const nav = el("div", { class: "preview-nav" });
  const body = el("div", {});
  const views = el("div", { class: "row node-views", role: "group", "aria-label": "Section view" });
  const showSource = () => {
    if (doc.file_type === "pdf") {
      pageButtons(nav, node.start_index, node.end_index, (p) => showPage(doc.id, p, null, body));
      showPage(doc.id, node.start_index, null, body);
    } else {
      nav.replaceChildren();
      showLines(doc.id, lineWindow(node.start_index, node.end_index), body);
    }
  };
  const sourceBtn = el("button", { type: "button", class: "small", text: doc.file_type === "pdf" ? "Pages" : "Text",
    "aria-pressed": "true" });
  const chunksBtn = el("button", { type: "button", class: "small", id: "show-chunks", text: "Chunks as stored",
    "aria-pressed": "false" });
  const press = (on) => { sourceBtn.setAttribute("aria-pressed", String(!on)); chunksBtn.setAttribute("aria-pressed", String(on)); };
  sourceBtn.addEventListener("click", () => { press(false); showSource(); });
  chunksBtn.addEventListener("click", () => { press(true); nav.replaceChildren(); showChunks(doc, node, body); });
  views.append(sourceBtn, chunksBtn);
  pane.replaceChildren(el("h2", { text: node.title }),
    el("p", { class: "muted small", text: pagesLabel(node.unit, [node.start_index, node.end_index]) }),
    node.summary ? el("p", { class: "small", text: readable(node.summary) }) : null, views, nav, body);
  showSource();
}

/** The section's chunks as they were stored and embedded, with their pages or lines. */
async function showChunks(doc, node, body) {
  body.replaceChildren(loading("Loading chunks…"));
  try {
    const data = await api(`/kb/documents/${doc.id}/chunks?node=${encodeURIComponent(node.node_id)}`);
    const unit = node.unit;
    body.replaceChildren(
      el("p", { class: "muted small", text: `${plural(data.chunks.length, "chunk")}${data.truncated ? " (the first ones)" : ""} in this section and its subsections` }),
      el("ol", { class: "chunk-list", id: "chunk-list" }, data.chunks.map((c) => el("li", { class: "chunk" },
        el("div", { class: "chunk-head small" },
          el("span", { class: "chip", text: c.page === null ? "—" : pagesLabel(unit, [c.page, c.page_end || c.page]) }),
          el("span", { class: "muted", text: ` #${c.id} · ${c.heading_path || "—"} · ${c.token_count} tokens` })),
        c.context ? el("div", { class: "chunk-context small muted", text: c.context }) : null,
        el("div", { class: "chunk-text", text: c.text })))));
  } catch (err) {
    body.replaceChildren(alertBox(err));
  }
}

/* ------------------------------------------------------------------ ingest */

async function renderIngest(view) {
  const folderPath = el("input", { id: "folder-path", name: "path", required: true, placeholder: "reports/2024",
    autocomplete: "off" });
  const recursive = el("input", { id: "recursive", name: "recursive", type: "checkbox" });
  const metaPath = el("input", { id: "meta-path", name: "metadata", placeholder: "optional: metadata.jsonl", autocomplete: "off" });
  const files = el("input", { id: "upload-files", name: "file", type: "file", multiple: true });
  const formats = el("p", { class: "muted small", id: "upload-formats" }, "Each file becomes its own job.");
  const folderMsg = el("div", {});
  const uploadMsg = el("div", {});
  const jobsBox = el("div", { id: "jobs" }, loading("Loading jobs…"));
  const colA = el("div", {});
  const colB = el("div", {});
  const folderForm = el("form", { class: "panel stack", id: "folder-form", "aria-label": "Ingest a folder" },
    el("h2", { text: "Ingest a folder on the server" }),
    el("p", { class: "muted small", text: "A path inside the server's ingest root (KB_INGEST_ROOT)." }),
    field("Folder path", folderPath), colA, field("Metadata file", metaPath),
    el("label", { class: "check", for: "recursive" }, recursive, "Include subfolders"),
    el("div", { class: "row end" }, el("button", { type: "submit", class: "primary", text: "Start ingest" })), folderMsg);
  const uploadForm = el("form", { class: "panel stack", id: "upload-form", "aria-label": "Upload files" },
    el("h2", { text: "Upload files" }),
    formats,
    field("Files", files), colB,
    el("div", { class: "row end" }, el("button", { type: "submit", class: "primary", id: "upload-btn", text: "Upload and ingest" })),
    uploadMsg);
  view.replaceChildren(
    el("div", { class: "page-head" }, el("div", {}, el("h1", { text: "Ingest" }),
      el("p", { class: "muted", text: "Add documents. Needs the admin token when the server has one." }))),
    el("div", { class: "grid cols-2" }, folderForm, uploadForm),
    el("h2", { text: "Jobs" }), jobsBox);
  capabilities().then((caps) => {
    const suffixes = caps.formats.flatMap((f) => f.suffixes);
    files.setAttribute("accept", suffixes.join(","));
    formats.textContent = `${suffixes.join(", ")} (up to ${caps.max_upload_mb} MB each). Each file becomes its own job.`;
  }).catch(() => { /* no accept list: the server still refuses what it cannot read */ });
  collectionSelect("folder-collection").then((s) => colA.append(field("Collection", s)));
  collectionSelect("upload-collection").then((s) => colB.append(field("Collection", s)));

  folderForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    folderMsg.replaceChildren();
    const body = { path: folderPath.value.trim(), collection: ($("#folder-collection") || { value: state.collection }).value, recursive: recursive.checked };
    if (metaPath.value.trim()) body.metadata = metaPath.value.trim();
    try {
      const job = await api("/kb/admin/ingest", { method: "POST", json: body });
      folderMsg.replaceChildren(el("div", { class: "notice", role: "status", text: `Job ${job.job_id} started.` }));
      pollJobs(jobsBox);
    } catch (err) {
      folderMsg.replaceChildren(alertBox(err));
    }
  });
  uploadForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    uploadMsg.replaceChildren();
    if (!files.files.length) {
      uploadMsg.replaceChildren(alertBox(new ApiError(0, "No file chosen", "Pick one or more files first.")));
      return;
    }
    const btn = $("#upload-btn");
    btn.disabled = true;
    const started = [];
    for (const f of files.files) {
      const form = new FormData();
      form.append("file", f, f.name);
      form.append("collection", ($("#upload-collection") || { value: state.collection }).value);
      try {
        const job = await api("/kb/admin/documents", { method: "POST", body: form });
        started.push(job.job_id);
      } catch (err) {
        uploadMsg.append(alertBox(new ApiError(err.status, `${f.name}: ${err.title || "upload failed"}`, err.detail)));
      }
    }
    btn.disabled = false;
    if (started.length) {
      uploadMsg.prepend(el("div", { class: "notice", role: "status", text: `Uploaded; ${plural(started.length, "job")} started.` }));
      files.value = "";
    }
    pollJobs(jobsBox);
  });
  pollJobs(jobsBox);
}

let pollTimer = null;
let jobsRunning = false;  // whether the last poll saw a job at work (its end refreshes collection counts)

async function pollJobs(box) {
  clearTimeout(pollTimer);
  if (!document.body.contains(box)) return;
  try {
    const { jobs } = await api(`/kb/admin/jobs?limit=20&items=${JOB_PAGE}`);
    for (const [i, job] of jobs.entries()) {  // a job shown from a later page of its files: that page
      const offset = state.jobPages.get(job.id) || 0;
      if (offset) jobs[i] = await api(`/kb/admin/jobs/${job.id}?items_limit=${JOB_PAGE}&items_offset=${offset}`);
    }
    const reload = () => pollJobs(box);
    box.replaceChildren(jobs.length ? el("div", {}, jobs.map((j) => jobCard(j, reload)))
      : stateBox("empty", "No jobs yet", "Start a folder ingest or upload files above."));
    // a cancelled job's file keeps "running" until its worker lets go (within seconds): polled until then too
    const running = jobs.some((j) => j.status === "queued" || j.status === "running"
      || j.items.some((i) => i.status === "running" || i.status === "pending"));
    if (jobsRunning && !running) refreshCollections();
    jobsRunning = running;
    if (running) pollTimer = setTimeout(reload, 1000);
  } catch (err) {
    box.replaceChildren(alertBox(err));
  }
}

/** Re-read every collection selector's counts (after an ingest finished or a document was deleted). */
async function refreshCollections() {
  let cols;
  try {
    cols = await api("/kb/collections");
  } catch (_) {
    return;
  }
  const count = new Map(cols.map((c) => [c.name, c.documents]));
  for (const option of document.querySelectorAll("select[name='collection'] option")) {
    if (count.has(option.value)) option.textContent = `${option.value} (${plural(count.get(option.value), "document")})`;
  }
}

const STATUS_CHIP = { done: "ok", ok: "ok", replaced: "ok", failed: "err", running: "blue", queued: "", pending: "", skipped: "warn",
  unsupported: "warn", cancelled: "warn" };
const STAGE_LABEL = { reading: "reading the file", tree: "building the tree", summaries: "writing summaries",
  chunking: "cutting into chunks", embedding: "embedding", storing: "storing" };

/** Where a running file is: "reading the file 300/3000 pages", "embedding 120/400 chunks",
 * "storing 2000/25000 chunks", "building the tree · 12 pages". */
function stageText(item) {
  if (item.status !== "running") return "";
  const label = STAGE_LABEL[item.stage] || "starting";
  if (item.stage === "embedding" || (item.stage === "storing" && item.stage_done < item.stage_total)) {
    return `${label} ${item.stage_done}/${item.stage_total} chunks`;
  }
  if (item.stage === "storing") return `${label} ${plural(item.stage_total, "chunk")}`;
  if (item.stage === "reading" && item.stage_total && item.stage_done < item.stage_total) {
    return `${label} ${item.stage_done}/${item.stage_total} pages`;
  }
  if (item.stage === "chunking") return item.stage_total ? `${label} · ${item.stage_done}/${item.stage_total} sections` : label;
  if (item.stage_total) return `${label} · ${plural(item.stage_total, "page")}`;
  return label;
}

/** What a job's chip says: "done · 1 failed" (amber) rather than a green "done" when files failed. */
function jobState(job) {
  const failed = (job.counts.failed || 0) + (job.counts.unsupported || 0);
  if (job.status === "done" && failed) {
    return { text: `done · ${failed} failed`, cls: "warn" };
  }
  return { text: job.status, cls: STATUS_CHIP[job.status] || "" };
}

/** Whether retrying a file can end otherwise: not for a file that is not what its name says, of a type not
 * supported, encrypted or corrupt — the same bytes fail the same way (a size or page limit may be raised). */
function retryable(item) {
  if (item.status === "cancelled") return true;
  if (item.status !== "failed") return false;
  return !/^This file is not |unsupported file type|encrypted|password required|corrupt or unreadable/i
    .test(item.error || "");
}

/** A job's file as its user named it: an upload's document name without the content hash the server adds
 * ("report-3f2a9c01d4.pdf" → "report.pdf"); a folder file's name as it is. */
function shownName(name, job) {
  return job.root_path.startsWith("uploads/") ? name.replace(/-[0-9a-f]{10}(\.[A-Za-z0-9]+)?$/, "$1") : name;
}

/** Where a job's files come from, for its card: the folder under the ingest root, or "uploaded file". */
function jobSource(job) {
  return job.root_path.startsWith("uploads/") ? `uploaded: ${shownName(job.root_path.split("/").pop(), job)}`
    : job.root_path;
}

const JOB_PAGE = 200;  // files of a job shown at once (a job of 20,000 files is read a page at a time)

/** "Files 201–400 of 20,000" with the pages before and after, when a job has more files than one page. */
function jobPager(job, reload) {
  const offset = state.jobPages.get(job.id) || 0;
  if (job.files <= JOB_PAGE && !offset) return null;
  const go = (to) => { state.jobPages.set(job.id, Math.max(0, to)); reload(); };
  const last = offset + job.items.length;
  return el("div", { class: "row pager", "aria-label": `Files of job ${job.id}` },
    el("button", { type: "button", class: "small ghost", text: "← Previous", disabled: offset === 0,
      "aria-label": `Previous files of job ${job.id}`, onclick: () => go(offset - JOB_PAGE) }),
    el("span", { class: "small muted pager-text", role: "status",
      text: `Files ${job.items.length ? offset + 1 : 0}–${last} of ${job.files.toLocaleString("en-US")}` }),
    el("button", { type: "button", class: "small ghost", text: "Next →", disabled: last >= job.files,
      "aria-label": `Next files of job ${job.id}`, onclick: () => go(offset + JOB_PAGE) }));
}

function jobCard(job, reload) {
  const finished = job.files - (job.counts.pending || 0) - (job.counts.running || 0);  // items: one page of them
  const total = job.files || job.items.length;
  // a running file counts by its stage's share, so the bar moves inside a long file
  const inFile = job.items.filter((i) => i.status === "running")
    .reduce((sum, i) => sum + (i.stage === "embedding" && i.stage_total ? 0.3 + 0.6 * (i.stage_done / i.stage_total)
      : i.stage === "reading" && i.stage_total ? 0.1 * (i.stage_done / i.stage_total)
      : ({ tree: 0.15, summaries: 0.25, chunking: 0.28, storing: 0.95 }[i.stage] || 0)), 0);
  const done = finished + inFile;
  const chip = jobState(job);
  const bar = el("div", { class: chip.cls === "warn" || chip.cls === "err" ? chip.cls : null });
  const action = (label, item, run) => el("button", { type: "button", class: "small", text: label,
    "aria-label": `${label} ${item.name}`, onclick: async (e) => {
      const btn = e.currentTarget;
      btn.disabled = true;
      try {
        await run();
        reload();
      } catch (err) {
        btn.disabled = false;
        btn.closest("td").append(alertBox(err));
      }
    } });
  const cancel = job.status === "queued" || job.status === "running" ? el("button", { type: "button",
    class: "small ghost cancel-job", text: "Cancel", "aria-label": `Cancel job ${job.id}`, onclick: async (e) => {
      const btn = e.currentTarget;
      btn.disabled = true;
      try {
        await api(`/kb/admin/jobs/${job.id}/cancel`, { method: "POST" });
      } catch (err) {
        if (err.status !== 409) card.append(alertBox(err));  // 409: it ended meanwhile
      }
      reload();
    } }) : null;
  const card = el("section", { class: "panel job", "aria-label": `Job ${job.id}`, dataset: { status: job.status } },
    el("div", { class: "job-head" },
      el("h2", { class: "job-title", text: `Job ${job.id} · ${job.collection}` }),
      el("span", { class: `chip job-state ${chip.cls}`, text: chip.text }), cancel),
    el("p", { class: "muted small job-source", text: jobSource(job), title: job.root_path }),
    el("div", { class: "progressbar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total,
      "aria-valuenow": finished, "aria-valuetext": `${finished} of ${plural(total, "file")} finished`,
      "aria-label": `Job ${job.id} progress` }, bar),
    el("div", { class: "stats" },
      el("span", {}, el("b", { text: `${finished}/${total}` }), " files"),
      el("span", {}, el("b", { text: job.pages }), " pages"),
      el("span", {}, el("b", { text: job.pages_per_s === null ? "—" : job.pages_per_s.toFixed(1) }), " pages/s"),
      job.seconds_left ? el("span", {}, "about ", el("b", { text: durationText(job.seconds_left) }), " left") : null,
      el("span", {}, el("b", { text: job.chunks }), " chunks")),
    job.error ? alertBox(new ApiError(0, "Job failed", job.error)) : null,
    jobPager(job, reload),
    job.items.length ? el("div", { class: "table-scroll" }, table([["File"], ["Status"], ["Pages", "num"], ["Seconds", "num"], ["Details"]],
      job.items.map((i) => [
        i.document_id ? el("a", { href: `#/documents/${i.document_id}`, text: shownName(i.name, job), title: i.name })
          : shownName(i.name, job),
        el("span", { class: `chip ${STATUS_CHIP[i.status] || ""}`, text: i.status }),
        i.pages || "—", i.seconds === null ? "—" : i.seconds.toFixed(1),
        i.status === "running" || i.status === "pending" ? el("div", {},
          i.status === "running" ? el("span", { class: "stage", role: "status", text: stageText(i) }) : null,
          el("div", { class: "row item-actions" }, action("Cancel", i,
            () => api(`/kb/admin/jobs/${job.id}/items/${i.id}/cancel`, { method: "POST" }))))
          : el("div", {}, el("span", { class: i.error ? `item-error ${i.status === "failed" ? "err" : "muted"}` : "muted",
            text: i.error || "" }),
          ["failed", "cancelled", "unsupported"].includes(i.status) ? el("div", { class: "row item-actions" },
            retryable(i) ? action("Retry", i, () => api(`/kb/admin/jobs/${job.id}/items/${i.id}/retry`,
              { method: "POST" })) : null,
            action("Remove", i, () => api(`/kb/admin/jobs/${job.id}/items/${i.id}`, { method: "DELETE" }))) : null)]))) : null);
  bar.style.width = `${total ? (100 * done) / total : 0}%`;
  return card;
}

/* ------------------------------------------------------------------ shell */

function renderNotFound(view) {
  view.replaceChildren(stateBox("error", "Page not found", "There is nothing at this address.",
    el("p", {}, el("a", { href: "#/ask", text: "Go to Ask →" }))));
}

function route(event) {
  const view = $("#view");
  if (event) view.focus({ preventScroll: true }); // after a navigation, focus starts at the new content
  const hash = location.hash.replace(/^#\/?/, "") || "ask";
  const [page, arg, sub] = hash.split("/");
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  clearTimeout(pollTimer);
  if (page === "ask") renderAsk(view);
  else if (page === "documents" && arg !== undefined) {
    if (/^\d{1,18}$/.test(arg) && (sub === undefined || sub === "facts")) renderDocument(view, arg, sub);
    else renderNotFound(view);
  } else if (page === "documents") renderDocuments(view);
  else if (page === "ingest") renderIngest(view);
  else if (page.startsWith("cite-")) return; // in-page citation anchors
  else renderNotFound(view);
  document.title = `${page.charAt(0).toUpperCase()}${page.slice(1)} — kb`;
}

function setupToken() {
  const dialog = $("#token-dialog");
  const btn = $("#token-btn");
  const input = $("#token-input");
  const paint = () => {
    btn.classList.toggle("set", Boolean(token()));
    btn.textContent = token() ? "Token set" : "Access token";
  };
  btn.addEventListener("click", () => { input.value = token(); dialog.showModal(); input.focus(); });
  $("#token-form").addEventListener("submit", () => {
    if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    paint();
    route();
  });
  // no token configured on the server (and none kept here): the button stays, but quiet
  capabilities().then((caps) => btn.classList.toggle("quiet", !caps.read_token && !caps.admin_token && !token()),
    () => btn.classList.remove("quiet"));
  $("#token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    input.value = "";
    dialog.close();
    paint();
    route();
  });
  paint();
}

function setupPreview() {
  const dialog = preview.dialog();
  $("#preview-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => preview.clear());
  dialog.addEventListener("click", (e) => { if (e.target === dialog) dialog.close(); });
}

document.addEventListener("DOMContentLoaded", () => {
  setupToken();
  setupPreview();
  window.addEventListener("hashchange", route);
  route();
});
