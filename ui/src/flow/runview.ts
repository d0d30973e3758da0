// A test run as the canvas shows it: each node's status, duration, tokens and streamed
// text, folded from the live events of the run. Pure functions: the editor keeps the
// view and feeds it events.
import type { Checkpoint, LiveEvent, Move, Run, RunStatus, Usage } from "../api/types";
import { fromPort } from "./edges";
import type { FlowDocument } from "./types";

export type NodeStatus = "queued" | "running" | "done" | "failed" | "waiting";

export interface NodeRun {
  status: NodeStatus;
  /** Steps of this node that finished in the run (a loop or a fan-out runs it more than once). */
  steps: number;
  /** Duration of the last finished step. */
  durationMs?: number;
  tokens: Usage;
  /** LLM text streamed by the step running now (or the last one). */
  text: string;
  attempt?: number;
  error?: string;
  prompt?: string;
  checkpoint?: string;
  /** A tool node: how often an agent called it (it has no steps of its own). */
  calls?: number;
  /** Runs nobody serves: no live worker reads this node's stream. */
  noWorker?: boolean;
  /** Its last step did not run: it gave back the output pinned for the run (flow/pins.ts). */
  pinned?: boolean;
  /** The run moved to this version at this node (a retry on another version). */
  movedTo?: string;
}

export interface RunView {
  run: string;
  status: RunStatus;
  nodes: Record<string, NodeRun>;
  error?: string;
}

const FINISHED = new Set<RunStatus>(["succeeded", "failed", "cancelled"]);

export function finished(s: RunStatus): boolean {
  return FINISHED.has(s);
}

export function newRunView(run: string, doc: FlowDocument): RunView {
  const view: RunView = { run, status: "queued", nodes: {} };
  const entry = doc.nodes.find((n) => n.type === "input");
  if (entry) view.nodes[entry.id] = blank("queued");
  return view;
}

function blank(status: NodeStatus): NodeRun {
  return { status, steps: 0, tokens: { input_tokens: 0, output_tokens: 0 }, text: "" };
}

type Data = Record<string, unknown>;

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/**
 * The tool node an agent's tool call ran: a node connected to the agent's tools port
 * whose tool name (its tool_name parameter, else its id) is the one called.
 */
export function toolNodeOf(doc: FlowDocument, agent: string, tool: string): string | undefined {
  for (const e of doc.edges) {
    if (e.to !== agent || e.to_port !== "tools") continue;
    const n = doc.nodes.find((x) => x.id === e.from);
    if (!n) continue;
    const name = typeof n.params?.tool_name === "string" && n.params.tool_name !== "" ? n.params.tool_name : n.id;
    if (name === tool) return n.id;
  }
  return undefined;
}

/** The tool a turn (an agent's saved model reply or tool result) ran, if it is a tool result. */
function toolOfTurn(turn: unknown): string | undefined {
  const t = turn as { kind?: unknown; tool?: unknown } | null;
  return t && t.kind === "tool" && typeof t.tool === "string" ? t.tool : undefined;
}

function called(n: NodeRun | undefined): NodeRun {
  const cur = n ?? blank("done");
  return { ...cur, status: "done", calls: (cur.calls ?? 0) + 1 };
}

/** Folds one event into the view; events of other runs leave it as it is. */
export function applyEvent(view: RunView, ev: LiveEvent, doc: FlowDocument): RunView {
  if (ev.run !== view.run) return view;
  const data = (ev.data && typeof ev.data === "object" ? ev.data : {}) as Data;
  if (ev.type === "run") {
    const status = data.status as RunStatus | undefined;
    if (!status) return view;
    const next: RunView = { ...view, status };
    if (status === "cancelled") {
      next.nodes = mapNodes(view.nodes, (n) => (n.status === "queued" || n.status === "running" || n.status === "waiting" ? { ...n, status: "failed", error: "cancelled" } : n));
    }
    return next;
  }
  const node = ev.node;
  if (!node) return view;
  const cur = view.nodes[node] ?? blank("queued");
  let upd: NodeRun = cur;
  const nodes = { ...view.nodes };
  switch (ev.type) {
    case "start":
      upd = { ...cur, status: "running", text: "", attempt: num(data.attempt) ?? cur.attempt };
      delete upd.error;
      break;
    case "retry":
      upd = { ...cur, status: "running", error: String(data.error ?? ""), attempt: num(data.attempt) ?? cur.attempt };
      break;
    case "dead":
      upd = { ...cur, status: "failed", error: String(data.error ?? "") };
      break;
    case "retried":
      upd = { ...cur, status: "queued" };
      delete upd.error;
      break;
    case "moved":
      upd = { ...cur, movedTo: typeof data.to === "string" ? data.to : undefined };
      break;
    case "resumed":
      upd = { ...cur, status: "running" };
      delete upd.prompt;
      break;
    case "rate_limit":
      // A model call waiting for its turn under the provider's shared rate limit.
      if (data.waiting === true) upd = { ...cur, status: "waiting", prompt: `waiting for the rate limit of ${String(data.provider ?? "the provider")}` };
      else {
        upd = { ...cur, status: "running" };
        delete upd.prompt;
      }
      break;
    case "turn": {
      const tool = toolOfTurn(ev.data);
      const target = tool && toolNodeOf(doc, node, tool);
      if (!target) return view;
      return { ...view, nodes: { ...view.nodes, [target]: called(view.nodes[target]) } };
    }
    case "token":
    case "tokens":
      if (typeof data.text === "string") upd = { ...cur, text: cur.text + data.text, status: cur.status === "queued" ? "running" : cur.status };
      break;
    case "step": {
      const waiting = data.status === "waiting";
      const usage = (data.usage ?? {}) as Partial<Usage>;
      upd = {
        ...cur,
        status: waiting ? "waiting" : "done",
        steps: cur.steps + (waiting ? 0 : 1),
        durationMs: num(data.duration_ms) ?? cur.durationMs,
        tokens: addUsage(cur.tokens, usage),
        checkpoint: ev.checkpoint ?? cur.checkpoint,
      };
      delete upd.error;
      if (data.pinned === true) upd.pinned = true;
      else delete upd.pinned;
      if (waiting && typeof data.prompt === "string") upd.prompt = data.prompt;
      else delete upd.prompt;
      if (!waiting) markQueued(nodes, doc, node, Array.isArray(data.ports) ? (data.ports as string[]) : undefined);
      break;
    }
    default:
      return view;
  }
  nodes[node] = upd;
  return { ...view, status: view.status === "queued" ? "running" : view.status, nodes };
}

/** Marks the nodes a finished step certainly activates (unconditional edges of its chosen ports) as queued. */
function markQueued(nodes: Record<string, NodeRun>, doc: FlowDocument, from: string, ports: string[] | undefined): void {
  for (const e of doc.edges) {
    if (e.from !== from || e.condition) continue;
    if (ports && !ports.includes(fromPort(e))) continue;
    const target = doc.nodes.find((n) => n.id === e.to);
    if (!target) continue;
    const cur = nodes[e.to];
    if (!cur) nodes[e.to] = blank("queued");
    else if (cur.status === "done") nodes[e.to] = { ...cur, status: "queued" };
  }
}

function mapNodes(nodes: Record<string, NodeRun>, f: (n: NodeRun) => NodeRun): Record<string, NodeRun> {
  const out: Record<string, NodeRun> = {};
  for (const [k, v] of Object.entries(nodes)) out[k] = f(v);
  return out;
}

/**
 * Brings the view in line with the run's checkpoints and status, after the fact: a
 * node with a committed step is done even if its live event was missed.
 */
export function reconcile(view: RunView, status: RunStatus, ckpts: Checkpoint[], error?: string, doc?: FlowDocument): RunView {
  const nodes = { ...view.nodes };
  const seen = new Map<string, Checkpoint[]>();
  const calls = new Map<string, number>();
  const failed = new Map<string, Checkpoint>();
  for (const c of ckpts) {
    if (c.kind === "turn" && doc) {
      const tool = toolOfTurn(c.update);
      const target = tool && toolNodeOf(doc, c.node, tool);
      if (target) calls.set(target, (calls.get(target) ?? 0) + 1);
    }
    if (c.kind === "error" && c.node) failed.set(c.node, c);
    if (!c.node || c.kind === "turn" || c.kind === "send" || c.kind === "input" || c.kind === "error") continue;
    const list = seen.get(c.node) ?? [];
    list.push(c);
    seen.set(c.node, list);
  }
  for (const [node, list] of seen) {
    const last = list[list.length - 1]!;
    const cur = nodes[node] ?? blank("done");
    const steps = list.filter((c) => c.kind !== "wait").length;
    const tokens = list.reduce((u, c) => addUsage(u, c.usage ?? {}), { input_tokens: 0, output_tokens: 0 } as Usage);
    const waiting = last.kind === "wait" && status === "waiting";
    const upd: NodeRun = { ...cur, steps, tokens, durationMs: last.duration_ms, checkpoint: last.id, status: waiting ? "waiting" : cur.status };
    if (last.pinned) upd.pinned = true;
    else delete upd.pinned;
    // A step committed after the node's last failed attempt: a retry brought it home.
    const lastFail = failed.get(node);
    const recovered = lastFail !== undefined && laterID(last.id, lastFail.id);
    if (recovered) delete upd.error;
    if (!waiting && (cur.status !== "failed" || recovered) && finished(status)) upd.status = "done";
    nodes[node] = upd;
  }
  for (const [node, c] of failed) {
    const cur = nodes[node];
    if (cur && cur.status === "done" && seen.get(node)?.some((s) => laterID(s.id, c.id))) continue; // a later attempt committed
    nodes[node] = { ...(cur ?? blank("failed")), error: c.error ?? cur?.error ?? "", ...(c.attempt !== undefined ? { attempt: c.attempt } : {}) };
    if (finished(status) && status !== "succeeded") nodes[node] = { ...nodes[node]!, status: "failed" };
  }
  for (const [node, n] of calls) nodes[node] = { ...(nodes[node] ?? blank("done")), status: "done", calls: n };
  if (finished(status)) {
    for (const [k, n] of Object.entries(nodes)) {
      if (n.status === "queued" || n.status === "running") {
        if (status === "failed" && n.error) nodes[k] = { ...n, status: "failed" };
        else if (!seen.has(k)) delete nodes[k];
      }
    }
  }
  const out: RunView = { ...view, status, nodes };
  // The run's error is the one it has now: a retried dead letter clears it.
  if (error) out.error = error;
  else delete out.error;
  return out;
}

/**
 * The error a run's summary shows: only a run that failed or was cancelled has one. A run
 * that went on after its dead letter was retried keeps what it last failed with
 * (last_error), and may keep it in a view folded before the retry; it is no error of the
 * run's now.
 */
export function runError(view: RunView, run: Pick<Run, "error"> | undefined): string | undefined {
  if (view.status !== "failed" && view.status !== "cancelled") return undefined;
  return run?.error || view.error || undefined;
}

/** Marks the nodes where the run waits for a worker nobody runs (and only those). */
export function markNoWorker(view: RunView, nodes: string[] | undefined): RunView {
  const want = new Set(finished(view.status) ? [] : (nodes ?? []));
  let changed = false;
  const out = { ...view.nodes };
  for (const [id, n] of Object.entries(out)) {
    if (n.noWorker && !want.has(id)) {
      const { noWorker: _, ...rest } = n;
      out[id] = rest;
      changed = true;
    }
  }
  for (const id of want) {
    const cur = out[id];
    if (cur?.noWorker) continue;
    out[id] = { ...(cur ?? blank("queued")), status: "queued", noWorker: true };
    changed = true;
  }
  return changed ? { ...view, nodes: out } : view;
}

/** Whether checkpoint id a ("ms-seq", or "ms-seq.k" for the k-th step of a fused commit) comes after b. */
export function laterID(a: string, b: string): boolean {
  const parse = (id: string) => {
    const [entry = "", k = "-1"] = id.split(".");
    const [ms = "0", seq = "0"] = entry.split("-");
    return [Number(ms), Number(seq), Number(k)];
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! > y[i]!;
  return false;
}

/** Adds a step's usage to a node's: tokens, and the estimated cost when there is one. */
export function addUsage(u: Usage, step: Partial<Usage>): Usage {
  const out: Usage = { input_tokens: u.input_tokens + (num(step.input_tokens) ?? 0), output_tokens: u.output_tokens + (num(step.output_tokens) ?? 0) };
  const cost = (u.cost_usd ?? 0) + (num(step.cost_usd) ?? 0);
  if (cost > 0) out.cost_usd = cost;
  return out;
}

/** The run's tokens and cost: the sum over its nodes. */
export function runUsage(view: RunView): Usage {
  return Object.values(view.nodes).reduce((u, n) => addUsage(u, n.tokens), { input_tokens: 0, output_tokens: 0 } as Usage);
}

/** An estimated cost in dollars, as the run page shows it ("" for none). */
export function formatCost(usd: number | undefined): string {
  if (!usd || usd <= 0) return "";
  if (usd < 0.0001) return "<$0.0001";
  return `$${usd.toFixed(4)}`;
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined) return "";
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Marks the nodes where the run moved to another version (the run's record of its moves). */
export function withMoves(view: RunView, moves: Move[] | undefined): RunView {
  if (!moves || moves.length === 0) return view;
  const nodes = { ...view.nodes };
  for (const m of moves) nodes[m.node] = { ...(nodes[m.node] ?? blank("queued")), movedTo: m.to };
  return { ...view, nodes };
}
