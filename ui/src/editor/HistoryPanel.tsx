// The flow's version history: each saved version with its time, note and run figures;
// open one read-only, compare any two on the canvas, roll back. The note typed here goes
// with the next save.
import { useCallback, useEffect, useState } from "react";
import { api, ApiError } from "../api/client";
import type { VersionHistory, VersionInfo } from "../api/types";
import { fromNow } from "../flow/schedules";
import { testsApi, type LastResult } from "../api/tests";
import { summaryLine } from "../flow/tests";
import { comparePair, short, versionLabel } from "../flow/versions";

interface Props {
  flow: string;
  isNew: boolean;
  /** Changes when the flow was saved, to load the history again. */
  savedAt: number;
  note: string;
  onNote: (note: string) => void;
  /** The version open on the canvas, if any. */
  open?: string | undefined;
  onOpen: (v: VersionInfo) => void;
  onCompare: (from: VersionInfo, to: VersionInfo) => void;
  onRollback: (v: VersionInfo) => void;
}

export function HistoryPanel({ flow, isNew, savedAt, note, onNote, open, onOpen, onCompare, onRollback }: Props) {
  const [h, setH] = useState<VersionHistory | undefined>();
  const [error, setError] = useState<string | undefined>();
  // Each version's last test result (the Tests tab, sluice test): best effort.
  const [tests, setTests] = useState<Record<string, LastResult>>({});
  const load = useCallback(() => {
    if (isNew) return;
    testsApi.lastResults(flow).then(setTests, () => setTests({}));
    api.versions(flow).then(
      (x) => {
        setH(x);
        setError(undefined);
      },
      (e) => setError(e instanceof ApiError && e.status === 404 ? undefined : e instanceof Error ? e.message : String(e)),
    );
  }, [flow, isNew]);
  useEffect(load, [load, savedAt]);

  const current = h?.versions.find((v) => v.current);
  return (
    <div className="history-panel" aria-label="version history">
      <label className="field">
        <span className="small">Note for the next save</span>
        <input id="save-note" value={note} placeholder="What changed, e.g. “shorter system prompt”" onChange={(e) => onNote(e.target.value)} />
      </label>
      {isNew && <p className="muted small">The history starts with the first save.</p>}
      {error && <p className="error">Could not load the history: {error}</p>}
      {h && (
        <>
          <p className="muted small">
            {h.versions.length} {h.versions.length === 1 ? "version" : "versions"}, newest first. Run figures are from the flow’s newest {h.runs_looked} runs.{" "}
            <button type="button" className="link" onClick={load}>
              Refresh
            </button>
          </p>
          <ComparePicker versions={h.versions} onCompare={onCompare} />
          <ol className="version-list">
            {h.versions.map((v, i) => {
              const older = h.versions[i + 1];
              return (
                <li key={v.version} className={`version${v.current ? " current" : ""}${open === v.version ? " open" : ""}`} data-version={v.version}>
                  <div className="version-head">
                    <code title={v.version}>{short(v.version)}</code>
                    {v.current && <span className="badge badge-current">current</span>}
                    <span className="muted small" title={v.saved_at ? new Date(v.saved_at).toLocaleString() : ""}>
                      {v.saved_at && !v.saved_at.startsWith("0001") ? fromNow(v.saved_at) : "before history was kept"}
                    </span>
                    {v.by && <span className="muted small version-by">by {v.by}</span>}
                  </div>
                  {v.message && <div className="version-note">{v.message}</div>}
                  <div className="muted small">
                    {v.nodes} nodes
                    {v.runs && v.runs.runs > 0 && (
                      <>
                        {" · "}
                        <a href={`/runs?flow=${encodeURIComponent(flow)}&version=${v.version.slice(0, 12)}`}>{v.runs.runs} runs</a> · {v.runs.succeeded} ok · {v.runs.failed} failed
                      </>
                    )}
                  </div>
                  {tests[v.version] && <VersionTests result={tests[v.version]!} />}
                  <div className="version-actions">
                    <button type="button" onClick={() => onOpen(v)}>
                      Open
                    </button>
                    {older && (
                      <button type="button" onClick={() => onCompare(older, v)} title="What this version changed">
                        Changes
                      </button>
                    )}
                    {!v.current && current && (
                      <button type="button" onClick={() => onCompare(v, current)} title="From this version to the current one">
                        vs current
                      </button>
                    )}
                    {!v.current && (
                      <button type="button" className="danger" onClick={() => onRollback(v)}>
                        Roll back
                      </button>
                    )}
                  </div>
                </li>
              );
            })}
          </ol>
        </>
      )}
    </div>
  );
}

/** A version's last test result: how many cases passed, which failed, when. */
function VersionTests({ result }: { result: LastResult }) {
  const failing = result.verdicts.filter((c) => !c.pass);
  return (
    <div className={`version-tests small ${result.failed ? "error" : "status-succeeded"}`} data-tests={`${result.passed}/${result.cases}`} title={failing.map((c) => `${c.case}: ${c.why ?? ""}`).join("\n")}>
      tests: {summaryLine(result)}
      {failing.length > 0 && <> · failing: {failing.map((c) => c.case).join(", ")}</>} · {fromNow(result.at)}
    </div>
  );
}

/** Two lists of the versions, "from" and "to", and a button that draws their diff. */
function ComparePicker({ versions, onCompare }: { versions: VersionInfo[]; onCompare: (from: VersionInfo, to: VersionInfo) => void }) {
  const [chosen, setChosen] = useState<{ from?: string; to?: string }>({});
  const pair = comparePair(versions, chosen.from, chosen.to);
  if (!pair) return null;
  const info = (v: string) => versions.find((x) => x.version === v)!;
  const options = versions.map((v) => (
    <option key={v.version} value={v.version}>
      {versionLabel(v, fromNow)}
    </option>
  ));
  return (
    <form
      className="version-compare"
      id="compare-versions"
      aria-label="compare two versions"
      onSubmit={(e) => {
        e.preventDefault();
        onCompare(info(pair.from), info(pair.to));
      }}
    >
      <label className="field">
        <span className="small">Compare from</span>
        <select id="compare-from" value={pair.from} onChange={(e) => setChosen({ ...pair, from: e.target.value })}>
          {options}
        </select>
      </label>
      <label className="field">
        <span className="small">to</span>
        <select id="compare-to" value={pair.to} onChange={(e) => setChosen({ ...pair, to: e.target.value })}>
          {options}
        </select>
      </label>
      <button type="submit" id="compare-button" disabled={pair.from === pair.to} title={pair.from === pair.to ? "Choose two different versions" : "What changed from the first to the second, on the canvas"}>
        Compare
      </button>
    </form>
  );
}
