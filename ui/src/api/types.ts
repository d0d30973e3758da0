// What the server's JSON API answers, mirroring store and engine types.
import type { Change } from "../flow/diff";

export type RunStatus = "queued" | "running" | "waiting" | "succeeded" | "failed" | "cancelled";

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  /** Estimated cost in US dollars at the provider's prices (absent: none known). */
  cost_usd?: number;
}

export interface Run {
  id: string;
  flow: string;
  version: string;
  status: RunStatus;
  input?: unknown;
  output?: unknown;
  error?: string;
  error_node?: string;
  last_error?: string;
  steps: number;
  live: number;
  dead_letters: number;
  usage: Usage;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  parent_run?: string;
  parent_checkpoint?: string;
  /** What started the run: "schedule:N" for the flow's Nth schedule. */
  trigger?: string;
  /** The schedule tick the run is for. */
  tick?: string;
  /** Approvals the run waits for, by node. */
  waiting?: Record<string, Wait>;
  /** The run has activations no live worker reads (only a run's own GET says). */
  no_worker?: boolean;
  /** The nodes where it waits for a worker. */
  waiting_for_worker?: string[];
  /** What the run's model calls spent, failed attempts included (absent: nothing). */
  spend?: { tokens: number; usd: number };
  /** The run's moves to other versions (a retry on another version, a waiting run moved). */
  moves?: Move[];
  /** The run this one replays, and the checkpoint it started from ("" : its input). */
  replay_of?: string;
  replay_of_checkpoint?: string;
  /** The replays of this run. */
  replayed_as?: string[];
}

/** A run moved to another version (docs/replay.md). */
export interface Move {
  from: string;
  to: string;
  node: string;
  dead?: string;
  by?: string;
  /** unix ms */
  at: number;
  attempt?: number;
  waiting?: boolean;
}

/** What a retry did. */
export interface Retried {
  id: string;
  entry: string;
  run: string;
  node: string;
  from: string;
  to: string;
  moved: boolean;
  attempt: number;
}

export interface Wait {
  prompt?: string;
  data?: unknown;
  deadline?: string;
  on_timeout?: string;
}

export interface Checkpoint {
  id: string;
  node: string;
  kind: string; // input, step, send, join, wait, resume, turn, error (a failed attempt: no state)
  step: number;
  parent?: string;
  attempt?: number;
  update?: unknown;
  output?: unknown;
  ports?: string[];
  branches?: string[];
  duration_ms: number;
  usage: Usage;
  worker?: string;
  /** What a failed attempt returned (kind "error"). */
  error?: string;
  /** The step did not run: it gave back the output pinned for its run. */
  pinned?: boolean;
  time: string;
  state?: unknown;
}

export interface Consumer {
  name: string;
  pending: number;
  idle_ms: number;
  inactive_ms: number;
}

export interface QueueStats {
  node: string;
  length: number;
  pending: number;
  lag: number;
  oldest_pending_idle_ms: number;
  dead_letters: number;
  consumers: Consumer[];
}

export interface FlowQueues {
  flow: string;
  dead_letters: number;
  nodes: QueueStats[];
  time: string;
}

export interface DeadLetter {
  id: string;
  flow: string;
  node: string;
  run: string;
  error: string;
  attempts: number;
  time: string;
  checkpoint: string;
  /** The version the step ran. */
  version: string;
  /** Attempts of earlier retries (attempts are numbered across retries). */
  attempts_before?: number;
}

/** An entry of a flow's events stream, as /ws and the SSE endpoints send it. */
export interface LiveEvent {
  id?: string;
  flow?: string;
  type: string;
  run?: string;
  node?: string;
  data?: unknown;
  checkpoint?: string;
  step?: number;
}

/** A message of /ws: an event, the flow's queue figures, or an answer to a request. */
export interface LiveMessage {
  type: "event" | "queues" | "subscribed" | "error";
  flow?: string;
  run?: string;
  event?: LiveEvent;
  queues?: FlowQueues;
  error?: { code: string; message: string };
}

/** Figures of a version's runs among the flow's newest runs. */
export interface VersionRuns {
  runs: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  active: number;
  tokens: number;
  mean_ms: number;
}

export interface VersionInfo {
  version: string;
  saved_at: string;
  message?: string;
  current: boolean;
  name?: string;
  nodes: number;
  runs?: VersionRuns;
  /** The environments that point at this version, in promotion order. */
  environments?: string[];
}

/** What a promotion's gate found (docs/environments.md). */
export interface PromotionTest {
  gate: "passed" | "failed" | "no cases" | "off" | "skipped";
  cases?: number;
  passed?: number;
  failing?: string[];
}

/** One move of an environment to a version: who, when, with which test result. */
export interface Promotion {
  id: string;
  at: string;
  environment: string;
  version: string;
  previous?: string;
  from?: string;
  by: string;
  message?: string;
  test?: PromotionTest;
}

/** One of the workspace's environments, and where it points for the flow. */
export interface EnvState {
  name: string;
  gate?: boolean;
  require_cases?: boolean;
  role?: string;
  /** Saving lands here. */
  first?: boolean;
  version?: string;
  /** Its version's schedules are the ones that run. */
  schedules?: boolean;
  last?: Promotion;
}

export interface Promoted {
  flow: string;
  promotion: Promotion;
  file_written?: boolean;
}

export interface VersionHistory {
  flow: string;
  current?: string;
  runs_looked: number;
  versions: VersionInfo[];
  environments?: EnvState[];
}

export interface VersionDetail extends VersionInfo {
  document: unknown;
}

export interface RolledBack {
  flow: string;
  version: string;
  previous?: string;
  file_written: boolean;
  published: boolean;
}

/** What converting a Langflow export did (the answer to an import). */
export interface ImportReport {
  from: "langflow";
  gaps: { node: string; type: string; why: string; placeholder?: string }[];
  notes: { node: string; type: string; message: string }[];
}

/** One node run alone, outside any run (POST .../nodes/NODE/try). */
export interface Trial {
  node: string;
  input: unknown;
  output: unknown;
  update?: Record<string, unknown>;
  state?: Record<string, unknown>;
  ports?: string[];
  next: string[];
  waits?: string;
  usage: Usage;
  duration_ms: number;
  error?: string;
  retryable?: boolean;
}

/** Two runs compared node by node (GET …/runs/RUN/compare). */
export interface Comparison {
  from: string;
  to: string;
  /** "12 same, 2 changed, 1 now fails" */
  summary: string;
  counts: Record<string, number>;
  nodes: { node: string; verdict: string; changes?: Change[] }[];
}
