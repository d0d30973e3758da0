// Test cases in the editor, apart from React: which nodes a case's run changed (what the
// canvas marks), the line a report or a version's last result is summed up in.
import type { CaseResult, TestSummary } from "../api/tests";

/** The nodes whose output changed in the case chosen; with none chosen, in any failed case. */
export function changedNodes(results: CaseResult[], chosen?: string): Set<string> {
  const out = new Set<string>();
  for (const r of results) {
    if (chosen ? r.case !== chosen : r.pass) continue;
    for (const n of r.changed ?? []) out.add(n);
  }
  return out;
}

/** The case to show first: the first that failed, else the first. */
export function firstToShow(results: CaseResult[]): string | undefined {
  return (results.find((r) => !r.pass) ?? results[0])?.case;
}

/** "2/3 passed · 120 tokens · $0.0010". */
export function summaryLine(s: TestSummary): string {
  const parts = [`${s.passed}/${s.cases} passed`];
  if (s.tokens > 0) parts.push(`${s.tokens} tokens`);
  if (s.cost_usd > 0) parts.push(`$${s.cost_usd.toFixed(4)}`);
  return parts.join(" · ");
}

/** The cases file's text as the Tests tab edits it. */
export function casesText(file: unknown): string {
  return JSON.stringify(file, null, 2);
}
