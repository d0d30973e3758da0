// The Tests tab: the flow's test cases (FLOW.cases.json beside the flow), edited here;
// the last test run saved as a case; the cases run on the working copy (a draft too)
// before saving, each case's verdict, and on the canvas the nodes whose output changed
// in the case chosen. flow/tests.ts decides what is marked.
import { useCallback, useEffect, useState } from "react";
import { ApiError } from "../api/client";
import { testsApi, type TestReport } from "../api/tests";
import type { FlowDocument, Problem } from "../flow/types";
import { casesText, changedNodes, firstToShow, summaryLine } from "../flow/tests";
import { TextArea } from "./TextArea";

interface Props {
  doc: FlowDocument;
  isNew: boolean;
  /** The editor's last test run, when it has finished: what "Save as a case" saves. */
  lastRun: string | undefined;
  canRun: boolean;
  /** Marks nodes on the canvas: the ones whose output changed in the case shown. */
  onMark: (nodes: Set<string>) => void;
  say: (text: string, kind?: "ok" | "warn" | "error") => void;
}

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

// The last report of each flow in this page, and the case shown: they outlive the tab,
// so the canvas keeps its marks while another tab (the inspector) is open.
const lastReports = new Map<string, { report: TestReport; shown: string | undefined }>();

export function TestsPanel({ doc, isNew, lastRun, canRun, onMark, say }: Props) {
  const [text, setText] = useState<string | undefined>();
  const [saved, setSaved] = useState<string | undefined>();
  const [problems, setProblems] = useState<Problem[]>([]);
  const [loadError, setLoadError] = useState<string | undefined>();
  const [busy, setBusy] = useState<"" | "run" | "save" | "case">("");
  const [report, setReport] = useState<TestReport | undefined>(() => lastReports.get(doc.id)?.report);
  const [shown, setShown] = useState<string | undefined>(() => lastReports.get(doc.id)?.shown);

  const load = useCallback(() => {
    if (isNew) return;
    testsApi.cases(doc.id).then(
      (v) => {
        const t = casesText(v.file);
        setText(t);
        setSaved(t);
        setProblems(v.problems);
        setLoadError(undefined);
      },
      (e) => setLoadError(errText(e)),
    );
  }, [doc.id, isNew]);
  useEffect(load, [load]);

  useEffect(() => {
    if (report) lastReports.set(doc.id, { report, shown });
    onMark(report ? changedNodes(report.results, shown) : new Set());
  }, [doc.id, report, shown, onMark]);
  const clear = () => {
    lastReports.delete(doc.id);
    setReport(undefined);
    setShown(undefined);
  };

  let parsed: unknown;
  let parseError: string | undefined;
  try {
    parsed = text === undefined ? undefined : JSON.parse(text);
  } catch (e) {
    parseError = errText(e);
  }
  const count = Array.isArray((parsed as { cases?: unknown[] })?.cases) ? (parsed as { cases: unknown[] }).cases.length : 0;
  const edited = text !== undefined && text !== saved;

  const saveCases = async () => {
    setBusy("save");
    try {
      const v = await testsApi.saveCases(doc.id, parsed);
      const t = casesText(v.file);
      setText(t);
      setSaved(t);
      setProblems([]);
      if (v.warning) say(`Cases ${v.warning}`, "warn");
      else say("Cases saved");
    } catch (e) {
      if (e instanceof ApiError && e.problems.length) setProblems(e.problems);
      say(`Cases not saved: ${errText(e)}`, "error");
    } finally {
      setBusy("");
    }
  };

  const saveRun = async () => {
    if (!lastRun) return;
    setBusy("case");
    try {
      const r = await testsApi.saveRunAsCase(doc.id, lastRun);
      const t = casesText(r.file);
      setText(t);
      setSaved(t);
      setProblems([]);
      say(`Saved run ${lastRun.slice(0, 8)} as case ${r.case.id}: its input, and its output as the expected one`);
    } catch (e) {
      say(`Not saved as a case: ${errText(e)}`, "error");
    } finally {
      setBusy("");
    }
  };

  const runCases = async () => {
    setBusy("run");
    try {
      const rep = await testsApi.run(doc, edited ? parsed : undefined);
      setReport(rep);
      setShown(firstToShow(rep.results));
      setProblems([]);
    } catch (e) {
      if (e instanceof ApiError && e.problems.length) setProblems(e.problems);
      say(`The cases did not run: ${errText(e)}`, "error");
    } finally {
      setBusy("");
    }
  };

  if (isNew) return <p className="muted">Save the flow first: its test cases live beside it, in {doc.id}.cases.json.</p>;
  const shownResult = report?.results.find((r) => r.case === shown);
  return (
    <div className="tests-panel" id="tests-panel" aria-label="test cases">
      <p className="muted small">
        Cases live beside the flow in <code>{doc.id}.cases.json</code>, reviewed in git with it; <code>sluice test</code> runs them in CI.
      </p>
      {loadError && <p className="error">Could not load the cases: {loadError}</p>}
      <div className="tests-actions">
        <button type="button" id="save-run-as-case" disabled={!lastRun || busy !== ""} onClick={() => void saveRun()} title={lastRun ? "Its input, and its output as the expected one (editable below)" : "Run the flow first (Test run tab)"}>
          {busy === "case" ? "Saving…" : "Save last run as a case"}
        </button>
        <button type="button" id="run-cases" className="primary" disabled={!canRun || count === 0 || busy !== "" || !!parseError} onClick={() => void runCases()} title="Run every case on the flow as it is here, saved or not">
          {busy === "run" ? "Running cases…" : `Run ${count} ${count === 1 ? "case" : "cases"} on the working copy`}
        </button>
      </div>
      {report && (
        <section className="test-report" id="test-report" aria-label="test results">
          <h3 className={report.failed ? "error" : ""} id="test-summary">
            {summaryLine(report)} <span className="muted small">on {report.draft ? "the working copy" : "the saved flow"} ({report.version.slice(0, 12)})</span>{" "}
            <button type="button" className="link small" id="clear-test-report" onClick={clear} title="Clear the results and the canvas's marks">
              Clear
            </button>
          </h3>
          <table className="test-results">
            <thead>
              <tr>
                <th>Case</th>
                <th>Result</th>
                <th>Tokens</th>
                <th>ms</th>
              </tr>
            </thead>
            <tbody>
              {report.results.map((r) => (
                <tr key={r.case} data-case={r.case} data-pass={r.pass ? "true" : "false"} className={`${r.pass ? "pass" : "fail"}${shown === r.case ? " selected" : ""}`} onClick={() => setShown(r.case)}>
                  <td>
                    <button type="button" className="link">{r.case}</button>
                  </td>
                  <td className={r.pass ? "status-succeeded" : "status-failed"}>{r.pass ? "pass" : "fail"}</td>
                  <td>{r.tokens}</td>
                  <td>{Math.round(r.duration_ms)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {shownResult && (
            <div className="test-case-detail" id="test-case-detail">
              {shownResult.why && <p className="error">{shownResult.why}</p>}
              <p className="small" id="changed-nodes">
                {shownResult.changed?.length ? (
                  <>
                    Output changed at: {shownResult.changed.map((n) => <code key={n} className="changed-node">{n}</code>)} (marked on the canvas)
                  </>
                ) : (
                  <span className="muted">No node’s output changed from the run the case was saved from.</span>
                )}
              </p>
              <ul className="small check-list">
                {(shownResult.checks ?? []).map((c, i) => (
                  <li key={i} className={c.pass ? "" : "error"}>
                    {c.pass ? "✓" : "✗"} {c.name || c.kind}
                    {c.why ? `: ${c.why}` : ""}
                  </li>
                ))}
              </ul>
              {shownResult.run && (
                <a className="small" href={`/flows/${encodeURIComponent(doc.id)}/runs/${encodeURIComponent(shownResult.run)}`}>
                  Open the case’s run
                </a>
              )}
            </div>
          )}
        </section>
      )}
      <details className="cases-editor" id="cases-editor" open={edited || problems.length > 0}>
        <summary>
          Edit the cases ({count}){edited && " — not saved"}
        </summary>
        {text !== undefined && <TextArea className="code" id="cases-text" rows={16} spellCheck={false} value={text} onText={setText} />}
        {parseError && <p className="field-problem">Not JSON: {parseError}</p>}
        {problems.length > 0 && (
          <ul className="problem-list" id="cases-problems">
            {problems.map((p, i) => (
              <li key={i} className="error">
                <code>{p.path || "(file)"}</code> {p.message}
              </li>
            ))}
          </ul>
        )}
        <div className="tests-actions">
          <button type="button" id="save-cases" disabled={!edited || !!parseError || busy !== ""} onClick={() => void saveCases()}>
            {busy === "save" ? "Saving…" : "Save cases"}
          </button>
          {edited && (
            <button type="button" onClick={() => setText(saved)}>
              Discard edits
            </button>
          )}
        </div>
        <p className="muted small">
          A case: <code>{`{"id", "input" | "start": {"node", "state"}, "pins", "expect": [...]}`}</code>; assertions: jq, equals, contains, schema, succeeds, fails_at, max_tokens, max_cost_usd, max_duration, graded. See docs/testing-flows.md.
        </p>
      </details>
    </div>
  );
}
