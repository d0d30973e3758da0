// The test-case API (server/cases.go): the flow's cases file, saving a run as a case,
// running the cases on the working copy, each version's last result.
import type { FlowDocument, Problem } from "../flow/types";
import { call } from "./client";

export interface CheckResult {
  kind: string;
  name?: string;
  pass: boolean;
  why?: string;
}

export interface CaseResult {
  case: string;
  name?: string;
  version: string;
  run?: string;
  pass: boolean;
  why?: string;
  checks: CheckResult[] | null;
  status: string;
  output: unknown;
  tokens: number;
  cost_usd: number;
  duration_ms: number;
  node_outputs?: Record<string, unknown>;
  /** Nodes whose output differs from the run the case was saved from. */
  changed?: string[];
}

export interface TestSummary {
  version: string;
  cases: number;
  passed: number;
  failed: number;
  pass_rate: number;
  tokens: number;
  cost_usd: number;
  duration_ms: number;
  failing?: string[];
}

export interface TestReport extends TestSummary {
  flow: string;
  at: string;
  draft?: boolean;
  results: CaseResult[];
}

export interface LastResult extends TestSummary {
  at: string;
  draft?: boolean;
  verdicts: { case: string; pass: boolean; why?: string }[];
}

export interface CasesView {
  /** The cases were saved but their commit to git failed (Sluice-Warning). */
  warning?: string;
  flow: string;
  exists: boolean;
  file: unknown;
  problems: Problem[];
}

const url = (flow: string) => `/api/flows/${encodeURIComponent(flow)}`;

export const testsApi = {
  cases: (flow: string) => call<CasesView>("GET", `${url(flow)}/cases`),
  saveCases: (flow: string, file: unknown) => call<CasesView>("PUT", `${url(flow)}/cases`, file),
  /** Saves a run as a case: its input, its output as the expected one. */
  saveRunAsCase: (flow: string, run: string, id?: string) => call<{ case: { id: string }; file: unknown }>("POST", `${url(flow)}/cases`, id ? { run, id } : { run }),
  /** Runs the cases (the ones given, unsaved, or the saved file) on the working copy. */
  run: (doc: FlowDocument, file?: unknown) => call<TestReport>("POST", `${url(doc.id)}/cases/run`, file === undefined ? { document: doc } : { document: doc, file }),
  lastResults: (flow: string) => call<{ versions: Record<string, LastResult> }>("GET", `${url(flow)}/tests`).then((r) => r.versions),
};
