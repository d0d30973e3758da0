// The run on the canvas: one started from the editor, or any run of the flow opened from
// the run picker or the run page (started by the API, a webhook, a schedule or a
// headless worker). Folds the flow's live events into a run view, keeps each node's
// queue figures for the canvas badges, reads the run back (output, approvals,
// checkpoints) when it settles, and while it is queued or running asks whether a
// worker serves it.
import { api, ApiError } from "../api/client";
import type { FlowQueues, LiveEvent, Run } from "../api/types";
import type { Pin } from "../flow/pins";
import type { QueueBadge } from "../flow/canvas";
import { applyEvent, finished, markNoWorker, newRunView, reconcile, type RunView, withMoves } from "../flow/runview";
import type { FlowDocument } from "../flow/types";
import { LiveFlow } from "../live/socket";

export interface TestRunState {
  connected: boolean;
  starting: boolean;
  view: RunView | undefined;
  run: Run | undefined;
  error: string | undefined;
  queues: Map<string, QueueBadge>;
  /** The flow's latest runs, for the run picker. */
  recent: Run[];
}

export class TestRun {
  private state: TestRunState = { connected: false, starting: false, view: undefined, run: undefined, error: undefined, queues: new Map(), recent: [] };
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private recentTimer: ReturnType<typeof setTimeout> | undefined;
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
    void this.loadRecent();
  }

  close(): void {
    this.live?.close();
    this.live = undefined;
    clearTimeout(this.pollTimer);
    clearTimeout(this.recentTimer);
  }

  /** Reads the flow's latest runs for the picker. */
  async loadRecent(): Promise<void> {
    try {
      this.set({ recent: await api.listRuns(this.flow) });
    } catch {
      /* the picker keeps what it has */
    }
  }

  /** Opens any run of the flow on the canvas and follows it. */
  async open(runID: string, doc: FlowDocument): Promise<void> {
    this.watch(doc.id);
    this.doc = doc;
    this.early = [];
    clearTimeout(this.pollTimer);
    this.set({ starting: true, error: undefined, view: undefined, run: undefined });
    await this.live!.ready();
    try {
      const [run, ckpts] = await Promise.all([api.getRun(this.flow, runID), api.checkpoints(this.flow, runID)]);
      let view = withMoves(reconcile(newRunView(runID, doc), run.status, ckpts, run.error, doc), run.moves);
      for (const ev of this.early) view = applyEvent(view, ev, doc);
      this.early = [];
      view = markNoWorker(view, run.waiting_for_worker);
      this.set({ starting: false, view, run });
      this.poll();
    } catch (e) {
      this.set({ starting: false, error: e instanceof ApiError ? e.message : String(e) });
    }
  }

  /** While the run is queued or running, asks now and then whether a worker serves it. */
  private poll(): void {
    clearTimeout(this.pollTimer);
    const v = this.state.view;
    if (!v || finished(v.status) || v.status === "waiting") return;
    this.pollTimer = setTimeout(async () => {
      const cur = this.state.view;
      if (!cur || cur.run !== v.run) return;
      try {
        const run = await api.getRun(this.flow, cur.run);
        const now = this.state.view;
        if (now && now.run === run.id) this.set({ run: { ...(this.state.run ?? run), ...run }, view: markNoWorker(now, run.waiting_for_worker) });
      } catch {
        /* next time */
      }
      this.poll();
    }, 1500);
  }

  /**
   * Starts a run of the saved flow and follows it; resolves to its id (undefined when it
   * did not start). pins hold some nodes' outputs fixed for the run (flow/pins.ts).
   */
  async start(doc: FlowDocument, input: unknown, pins?: Record<string, Pin>): Promise<string | undefined> {
    this.watch(doc.id);
    this.doc = doc;
    this.early = [];
    this.set({ starting: true, error: undefined, view: undefined, run: undefined });
    await this.live!.ready();
    try {
      const started = await api.startRun(doc.id, input, pins);
      let view = newRunView(started.run, doc);
      for (const ev of this.early) view = applyEvent(view, ev, doc);
      this.early = [];
      this.set({ starting: false, view });
      if (finished(view.status) || view.status === "waiting") void this.refresh();
      else this.poll();
      return started.run;
    } catch (e) {
      this.set({ starting: false, error: e instanceof ApiError ? e.message : String(e) });
      return undefined;
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
      this.set({ run, view: markNoWorker(withMoves(reconcile(cur, run.status, ckpts, run.error, this.doc), run.moves), run.waiting_for_worker) });
      this.poll();
    } catch (e) {
      this.set({ error: e instanceof ApiError ? e.message : String(e) });
    }
  }

  private onEvent(ev: LiveEvent): void {
    if (ev.type === "run") {
      // A run started or settled anywhere: the picker reads the list again (at most once a second).
      if (!this.recentTimer)
        this.recentTimer = setTimeout(() => {
          this.recentTimer = undefined;
          void this.loadRecent();
        }, 1000);
    }
    const v = this.state.view;
    if (!v) {
      if (this.state.starting) this.early.push(ev);
      return;
    }
    if (!this.doc || ev.run !== v.run) return;
    let next = applyEvent(v, ev, this.doc);
    if (next === v) return;
    if (ev.type === "start" || ev.type === "step") next = markNoWorker(next, []); // a worker took it
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
