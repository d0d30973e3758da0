// The JSON API, one function per call. Every request and answer shape lives here, so the
// rest of the editor never builds a URL.
import type { Change } from "../flow/diff";
import type { Pin } from "../flow/pins";
import type { ComponentSpec, FlowDocument, Problem } from "../flow/types";
import type { SavedSchedule } from "../flow/schedules";
import type { VersionDiff } from "../flow/versions";
import type { Checkpoint, DeadLetter, FlowQueues, ImportReport, Promoted, RolledBack, Run, Trial, VersionDetail, VersionHistory, Retried, Comparison } from "./types";

/** An error answer of the API: {"error": {status, code, message, problems?}}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly problems: Problem[] = [],
  ) {
    super(message);
  }
}

export async function call<T>(method: string, url: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  // Every change is a JSON request, with a body or without: the server refuses others
  // (another site's page cannot send this type without a CORS preflight).
  if (method !== "GET") headers["Content-Type"] = "application/json";
  const init: RequestInit = { method, headers, credentials: "same-origin" };
  if (body !== undefined) init.body = JSON.stringify(body);
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch {
    throw new ApiError(0, "unavailable", "the server cannot be reached");
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    throw new ApiError(res.status, "internal", `unexpected answer (${res.status})`);
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string; problems?: Problem[] } })?.error;
    throw new ApiError(res.status, e?.code ?? "internal", e?.message ?? `request failed (${res.status})`, e?.problems ?? []);
  }
  return data as T;
}

const flowURL = (flow: string) => `/api/flows/${encodeURIComponent(flow)}`;
const runURL = (flow: string, run: string) => `${flowURL(flow)}/runs/${encodeURIComponent(run)}`;

export interface Validation {
  valid: boolean;
  version?: string;
  problems: Problem[];
}

export interface Saved {
  id: string;
  version: string;
  published: boolean;
  problems: Problem[];
  /** Set for an imported Langflow export. */
  import?: ImportReport;
}

export interface ScheduleList {
  flow: string;
  version: string;
  now: string;
  schedules: SavedSchedule[];
}

export interface DraftSaved {
  id: string;
  draft: true;
  valid: boolean;
  version?: string;
  problems: Problem[];
}

export interface Started {
  run: string;
  flow: string;
  status: string;
}

/** A tool as a model sees it. */
export interface ToolDef {
  name: string;
  description?: string;
  parameters?: unknown;
}

/** What the server answers for an uploaded file: the reference a run's input carries. */
export interface FileRef {
  $file: string;
  name: string;
  content_type: string;
  size: number;
  sha256?: string;
  expires?: string;
}

/**
 * Uploads a file for the flow's runs. The body is the file itself; its name goes in
 * X-File-Name, a header another site's page cannot send without a CORS preflight.
 */
async function upload(flow: string, file: File): Promise<FileRef> {
  let res: Response;
  try {
    res = await fetch(`${flowURL(flow)}/files`, {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": file.type || "application/octet-stream", "X-File-Name": encodeURIComponent(file.name) },
      body: file,
    });
  } catch {
    throw new ApiError(0, "unavailable", "the server cannot be reached");
  }
  const data = (await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | FileRef | undefined;
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(res.status, e?.code ?? "internal", `${file.name}: ${e?.message ?? `upload failed (${res.status})`}`);
  }
  return data as FileRef;
}

export const api = {
  uploadFile: upload,
  components: () => call<{ components: ComponentSpec[] }>("GET", "/api/components").then((r) => r.components),
  getFlow: (flow: string) => call<FlowDocument>("GET", flowURL(flow)),
  validate: (doc: FlowDocument) => call<Validation>("POST", "/api/flows/validate", doc),
  /** Saves and publishes a valid document; create refuses (409) to replace a flow that exists. */
  save: (doc: FlowDocument, create = false, message?: string) => {
    const q = new URLSearchParams();
    if (create) q.set("create", "true");
    if (message) q.set("message", message);
    return call<Saved>("PUT", flowURL(doc.id) + (q.size ? "?" + q.toString() : ""), doc);
  },
  /** Keeps a draft, whatever its problems; nothing is published. */
  saveDraft: (doc: FlowDocument, create = false) => call<DraftSaved>("PUT", `${flowURL(doc.id)}/draft` + (create ? "?create=true" : ""), doc),
  /** Sends a draft while the page unloads (the request outlives the page). */
  saveDraftOnExit: (doc: FlowDocument) =>
    void fetch(`${flowURL(doc.id)}/draft`, { method: "PUT", keepalive: true, credentials: "same-origin", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(doc) }).catch(() => undefined),
  deleteDraft: (flow: string) => call<void>("DELETE", `${flowURL(flow)}/draft`),
  /** Starts a run; pins hold some nodes' outputs fixed for it (they do not run). */
  startRun: (flow: string, input: unknown, pins?: Record<string, Pin>) => call<Started>("POST", `${flowURL(flow)}/runs`, pins ? { input, pins } : { input }),
  getRun: (flow: string, run: string) => call<Run>("GET", runURL(flow, run)),
  listRuns: (flow: string, limit = 20) => call<{ runs: Run[] }>("GET", `${flowURL(flow)}/runs?limit=${limit}`).then((r) => r.runs),
  cancel: (flow: string, run: string) => call<Run>("POST", `${runURL(flow, run)}/cancel`),
  resume: (flow: string, run: string, node: string, decision: { decision: "approve" | "reject"; value?: unknown; comment?: string }) =>
    call<Run>("POST", `${runURL(flow, run)}/resume`, { node, ...decision }),
  fork: (flow: string, run: string, checkpoint: string, patch: unknown) =>
    call<Started>("POST", `${runURL(flow, run)}/fork`, patch === undefined ? { checkpoint } : { checkpoint, patch }),
  checkpoints: (flow: string, run: string) => call<{ checkpoints: Checkpoint[] }>("GET", `${runURL(flow, run)}/checkpoints`).then((r) => r.checkpoints),
  checkpoint: (flow: string, run: string, id: string) => call<Checkpoint>("GET", `${runURL(flow, run)}/checkpoints/${encodeURIComponent(id)}`),
  diff: (flow: string, run: string, id: string) =>
    call<{ from: string; to: string; changes: Change[] }>("GET", `${runURL(flow, run)}/checkpoints/${encodeURIComponent(id)}/diff`).then((r) => r.changes),
  queues: (flow: string) => call<FlowQueues>("GET", `${flowURL(flow)}/queues`),
  deadLetters: (flow: string) => call<{ dead_letters: DeadLetter[] }>("GET", `${flowURL(flow)}/deadletters`).then((r) => r.dead_letters),
  /** Compares a replay with the run it replays (or run with other) node by node. */
  compare: (flow: string, run: string, other?: string) =>
    call<Comparison>("GET", `${runURL(flow, run)}/compare${other ? `?with=${encodeURIComponent(other)}` : ""}`),
  /** Retries a dead letter on version ("current", a version, or "" / "original": as it was). */
  retryDead: (flow: string, id: string, version = "", by = "editor") => call<Retried>("POST", `${flowURL(flow)}/deadletters/${encodeURIComponent(id)}/retry`, { version, by }),
  discardDead: (flow: string, id: string) => call<void>("DELETE", `${flowURL(flow)}/deadletters/${encodeURIComponent(id)}`),
  hookInfo: (flow: string) => call<{ url: string; enabled: boolean; secret_env: string }>("GET", `${flowURL(flow)}/hooks`),
  deleteFlow: (flow: string) => call<void>("DELETE", flowURL(flow)),
  importFlow: (doc: unknown, opts: { overwrite?: boolean; partial?: boolean } = {}) => {
    const q = new URLSearchParams();
    if (opts.overwrite) q.set("overwrite", "true");
    if (opts.partial) q.set("partial", "true");
    return call<Saved>("POST", `/api/flows${q.size ? "?" + q.toString() : ""}`, doc);
  },
  versions: (flow: string) => call<VersionHistory>("GET", `${flowURL(flow)}/versions`),
  version: (flow: string, version: string) => call<VersionDetail>("GET", `${flowURL(flow)}/versions/${encodeURIComponent(version)}`),
  versionDiff: (flow: string, from: string, to: string) =>
    call<VersionDiff>("GET", `${flowURL(flow)}/versions/${encodeURIComponent(from)}/diff?to=${encodeURIComponent(to)}`),
  rollback: (flow: string, version: string, message?: string) => call<RolledBack>("POST", `${flowURL(flow)}/rollback`, { version, message }),
  /** Points environment env at version, after its gate (docs/environments.md). */
  promote: (flow: string, env: string, version: string, message?: string) =>
    call<Promoted>("POST", `${flowURL(flow)}/environments/${encodeURIComponent(env)}/promote`, { version, message }),
  schedules: (flow: string) => call<ScheduleList>("GET", `${flowURL(flow)}/schedules?next=3&runs=5`),
  pauseSchedule: (flow: string, n: number) => call<SavedSchedule>("POST", `${flowURL(flow)}/schedules/${n}/pause`),
  resumeSchedule: (flow: string, n: number) => call<SavedSchedule>("POST", `${flowURL(flow)}/schedules/${n}/resume`),
  mcpTools: (params: unknown) => call<{ tools: ToolDef[] }>("POST", "/api/mcp/tools", { params }).then((r) => r.tools),
  /** Runs one node of the working copy alone on a state; nothing is stored. */
  tryNode: (doc: FlowDocument, node: string, state: unknown) =>
    call<Trial>("POST", `${flowURL(doc.id)}/nodes/${encodeURIComponent(node)}/try`, { document: doc, state }),
};
