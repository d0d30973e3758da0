// The queues page, live: the figures of each node's stream come every second over the
// websocket; dead letters are read again when one is added, retried or discarded.
import { api } from "../api/client";
import type { DeadLetter, FlowQueues } from "../api/types";
import { formatTime } from "../flow/time";
import { LiveFlow } from "../live/socket";

function ms(v: number): string {
  if (v <= 0) return "—";
  if (v < 1000) return `${v} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  return `${Math.floor(v / 60_000)} min`;
}

function cell(text: string, cls = ""): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

/** What the consumers cell says of a node no worker has read (yet): where its steps run, from the page's notes. */
export function noConsumer(note: string | undefined): string {
  return note ?? "none yet: a worker shows here once it reads this node";
}

export function renderQueues(tbody: HTMLElement, q: FlowQueues, notes: Record<string, string> = {}): void {
  const rows = q.nodes.map((n) => {
    const tr = document.createElement("tr");
    tr.dataset.node = n.node;
    tr.append(
      cell(n.node, "mono"),
      cell(String(n.length), "num"),
      cell(String(n.pending), "num"),
      cell(String(n.lag), "num"),
      cell(n.consumers.length ? n.consumers.map((c) => `${c.name} (${c.pending} pending, idle ${ms(c.idle_ms)})`).join(", ") : noConsumer(notes[n.node]), "small"),
      cell(ms(n.oldest_pending_idle_ms), "num"),
      cell(String(n.dead_letters), n.dead_letters > 0 ? "num error" : "num"),
    );
    return tr;
  });
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = cell("No node streams yet: they appear when the flow is published.", "muted");
    td.colSpan = 7;
    tr.append(td);
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
}

export function renderDead(root: HTMLElement, flow: string, list: DeadLetter[]): void {
  const tbody = root.querySelector("tbody")!;
  const empty = root.querySelector<HTMLElement>(".dead-empty");
  root.querySelector<HTMLElement>("table")!.hidden = list.length === 0;
  if (empty) empty.hidden = list.length > 0;
  tbody.replaceChildren(
    ...list.map((d) => {
      const tr = document.createElement("tr");
      tr.dataset.dead = d.id;
      const run = document.createElement("a");
      run.href = `/flows/${flow}/runs/${d.run}`;
      run.textContent = d.run;
      run.className = "mono";
      const runCell = document.createElement("td");
      runCell.append(run);
      const actionsCell = document.createElement("td");
      const actions = document.createElement("div");
      actions.className = "row-actions";
      actionsCell.append(actions);
      const retry = document.createElement("button");
      retry.type = "button";
      retry.textContent = "Retry";
      retry.dataset.post = `/api/flows/${flow}/deadletters/${d.id}/retry`;
      retry.dataset.then = "none";
      retry.title = "run the step again on the version it ran";
      const onCurrent = document.createElement("button");
      onCurrent.type = "button";
      onCurrent.className = "retry-current";
      onCurrent.textContent = "Retry on the current version";
      onCurrent.title = "run the step on the flow's current version (the run moves to it if it can)";
      onCurrent.dataset.post = retry.dataset.post;
      onCurrent.dataset.body = JSON.stringify({ version: "current", by: "queues page" });
      onCurrent.dataset.then = "none";
      const discard = document.createElement("button");
      discard.type = "button";
      discard.className = "danger";
      discard.textContent = "Discard";
      discard.dataset.delete = `/api/flows/${flow}/deadletters/${d.id}`;
      discard.dataset.confirm = "Discard this dead letter? Its run stays failed.";
      discard.dataset.then = "none";
      actions.append(retry, onCurrent, discard);
      const when = document.createElement("td");
      when.className = "small";
      const time = document.createElement("time");
      time.dateTime = d.time;
      time.textContent = formatTime(d.time);
      when.append(time);
      tr.append(when, cell(d.node, "mono"), runCell, cell(d.error, "error"), cell(String(d.attempts), "num"), actionsCell);
      return tr;
    }),
  );
}

export function initQueues(): void {
  const root = document.querySelector<HTMLElement>("[data-queues]");
  if (!root) return;
  const flow = root.dataset.queues!;
  const tbody = root.querySelector<HTMLElement>("#queue-rows");
  const dead = root.querySelector<HTMLElement>("#dead-letters");
  const status = root.querySelector<HTMLElement>("#live-status");
  let notes: Record<string, string> = {};
  try {
    notes = (JSON.parse(root.querySelector<HTMLElement>("#queue-table")?.dataset.notes ?? "{}") as Record<string, string> | null) ?? {};
  } catch {
    /* no notes */
  }
  let pending: ReturnType<typeof setTimeout> | undefined;
  const reloadDead = () => {
    clearTimeout(pending);
    pending = setTimeout(() => {
      if (dead) void api.deadLetters(flow).then((l) => renderDead(dead, flow, l));
    }, 100);
  };
  new LiveFlow(flow, {
    status: (c) => status && (status.textContent = c ? "live" : "reconnecting…"),
    queues: (q) => tbody && renderQueues(tbody, q, notes),
    event: (ev) => {
      if (ev.type === "dead" || ev.type === "retried" || ev.type === "run") reloadDead();
    },
  });
  // A retry or discard from this page: read the list again at once.
  root.addEventListener("click", (e) => {
    if ((e.target as Element).closest("button[data-post], button[data-delete]")) setTimeout(reloadDead, 300);
  });
}
