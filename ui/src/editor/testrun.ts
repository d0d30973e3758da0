// A test run from the editor: starts a run, folds the flow's live events into a run
// view, keeps each node's queue figures for the canvas badges, and reads the run back
// (output, approvals, checkpoints) when it settles.
import { api, ApiError } from "../api/client";
import type { FlowQueues, LiveEvent, Run } from "../api/types";
import type { QueueBadge } from "../flow/canvas";
import { applyEvent, finished, newRunView, reconcile, type RunView } from "../flow/runview";
import type { FlowDocument } from "../flow/types";
import { LiveFlow } from "../live/socket";

export interface TestRunState {
  connected: boolean;
  starting: boolean;
  view: RunView | undefined;
  run: Run | undefined;
  error: string | undefined;
  queues: Map<string, QueueBadge>;
}

export class TestRun {
  private state: TestRunState = { connected: false, starting: false, view: undefined, run: undefined, error: undefined, queues: new Map() };
  private readonly listeners = new Set<() => void>();
  private live: LiveFlow | undefined;
  private doc: FlowDocument | undefined;
  /** Events that arrived before the run's id was known. */
  private early: LiveEvent[] = [];

  constructor(private flow: string) {}

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  };

  get = (): TestRunState => this.state;

  private set(patch: Partial<TestRunState>): void {
    this.state = { ...this.state, ...patch };
    this.listeners.forEach((f) => f());
  }

  /** Watches the flow's events and queues (for a flow that exists on the server). */
  watch(flow = this.flow): void {
    if (this.live && this.live.flow === flow) return;
    this.live?.close();
    this.flow = flow;
    this.live = new LiveFlow(flow, {
      status: (connected) => this.set({ connected }),
      event: (ev) => this.onEvent(ev),
      queues: (q) => this.onQueues(q),
    });
  }

  close(): void {
    this.live?.close();
    this.live = undefined;
  }

  async start(doc: FlowDocument, input: unknown): Promise<void> {
    this.watch(doc.id);
    this.doc = doc;
    this.early = [];
    this.set({ starting: true, error: undefined, view: undefined, run: undefined });
    await this.live!.ready();
    try {
      const started = await api.startRun(doc.id, input);
      let view = newRunView(started.run, doc);
      for (const ev of this.early) view = applyEvent(view, ev, doc);
      this.early = [];
      this.set({ starting: false, view });
      if (finished(view.status) || view.status === "waiting") void this.refresh();
    } catch (e) {
      this.set({ starting: false, error: e instanceof ApiError ? e.message : String(e) });
    }
  }

  async cancel(): Promise<void> {
    const v = this.state.view;
    if (!v) return;
    await this.act(() => api.cancel(this.flow, v.run));
  }

  async resume(node: string, decision: { decision: "approve" | "reject"; value?: unknown; comment?: string }): Promise<void> {
    const v = this.state.view;
    if (!v) return;
    await this.act(() => api.resume(this.flow, v.run, node, decision));
  }

  private async act(f: () => Promise<Run>): Promise<void> {
    try {
      const run = await f();
      this.set({ run, error: undefined });
    } catch (e) {
      this.set({ error: e instanceof ApiError ? e.message : String(e) });
    }
  }

  /** Reads the run and its checkpoints and brings the view in line with them. */
  async refresh(): Promise<void> {
    const v = this.state.view;
    if (!v || !this.doc) return;
    try {
      const [run, ckpts] = await Promise.all([api.getRun(this.flow, v.run), api.checkpoints(this.flow, v.run)]);
      const cur = this.state.view;
      if (!cur || cur.run !== run.id) return;
      this.set({ run, view: reconcile(cur, run.status, ckpts, run.error, this.doc) });
    } catch (e) {
      this.set({ error: e instanceof ApiError ? e.message : String(e) });
    }
  }

  private onEvent(ev: LiveEvent): void {
    const v = this.state.view;
    if (!v) {
      if (this.state.starting) this.early.push(ev);
      return;
    }
    if (!this.doc || ev.run !== v.run) return;
    const next = applyEvent(v, ev, this.doc);
    if (next === v) return;
    this.set({ view: next });
    const settled = ev.type === "run" && (finished(next.status) || next.status === "waiting");
    const parked = ev.type === "step" && (ev.data as { status?: string } | undefined)?.status === "waiting";
    if (settled || parked) void this.refresh();
  }

  private onQueues(q: FlowQueues): void {
    const m = new Map<string, QueueBadge>();
    for (const n of q.nodes) m.set(n.node, { pending: n.pending, lag: n.lag, dead: n.dead_letters });
    this.set({ queues: m });
  }
}
