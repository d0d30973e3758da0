// The flow's version history: each saved version with its time, note and run figures;
// open one read-only, compare any two on the canvas, roll back, promote to an
// environment (docs/environments.md). The note typed here goes with the next save.
import { useCallback, useEffect, useState } from "react";
import { api, ApiError } from "../api/client";
import type { EnvState, VersionHistory, VersionInfo } from "../api/types";
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
  /** False when the person may not change flows (promoting needs at least an editor, unless an environment says otherwise). */
  canPromote?: boolean;
}

export function HistoryPanel({ flow, isNew, savedAt, note, onNote, open, onOpen, onCompare, onRollback, canPromote = true }: Props) {
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
  // What the last promotion said: done, or refused by its gate (the failing cases).
  const [promoted, setPromoted] = useState<{ ok: boolean; text: string } | undefined>();
  const [promoting, setPromoting] = useState<string | undefined>();
  const promote = useCallback(
    async (v: VersionInfo, env: EnvState) => {
      const gate = env.gate ? " Its gate runs the flow's test cases on the version first." : "";
      if (!confirm(`Promote version ${short(v.version)} to ${env.name}? New runs through ${env.name} start on it; runs in flight keep theirs.${gate}`)) return;
      setPromoting(`${v.version}:${env.name}`);
      setPromoted(undefined);
      try {
        const p = await api.promote(flow, env.name, v.version);
        const t = p.promotion.test;
        const tested = t?.gate === "passed" ? ` after ${t.passed} of ${t.cases} test cases passed` : t?.gate === "no cases" ? " (the flow has no test cases)" : "";
        setPromoted({ ok: true, text: `${env.name} now runs ${short(v.version)}${tested}.` });
      } catch (e) {
        setPromoted({ ok: false, text: `Not promoted to ${env.name}: ${e instanceof Error ? e.message : String(e)}` });
      } finally {
        setPromoting(undefined);
        load(); // the gate's test is the version's last result, passed or not
      }
    },
    [flow, load],
  );

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
          {h.environments && h.environments.length > 0 && <Environments envs={h.environments} />}
          {promoted && (
            <p id="promote-result" role="status" className={promoted.ok ? "status-succeeded" : "error"}>
              {promoted.text}
            </p>
          )}
          <ComparePicker versions={h.versions} onCompare={onCompare} />
          <ol className="version-list">
            {h.versions.map((v, i) => {
              const older = h.versions[i + 1];
              return (
                <li key={v.version} className={`version${v.current ? " current" : ""}${open === v.version ? " open" : ""}`} data-version={v.version}>
                  <div className="version-head">
                    <code title={v.version}>{short(v.version)}</code>
                    {v.current && <span className="badge badge-current">current</span>}
                    {(v.environments ?? []).map((env) => (
                      <span key={env} className="badge badge-env" data-env={env} title={`${env} runs this version`}>
                        {env}
                      </span>
                    ))}
                    <span className="muted small" title={v.saved_at ? new Date(v.saved_at).toLocaleString() : ""}>
                      {v.saved_at && !v.saved_at.startsWith("0001") ? fromNow(v.saved_at) : "before history was kept"}
                    </span>
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
                    {(h.environments ?? [])
                      .filter((env) => !env.first && env.version !== v.version)
                      .map((env) => (
                        <button
                          key={env.name}
                          type="button"
                          className="promote"
                          data-env={env.name}
                          disabled={!canPromote || promoting !== undefined}
                          title={!canPromote ? "Promoting needs the editor role (or the environment's own)" : env.gate ? `Promote to ${env.name}: the flow's test cases must pass on it first` : `Promote to ${env.name}`}
                          onClick={() => void promote(v, env)}
                        >
                          {promoting === `${v.version}:${env.name}` ? `Promoting to ${env.name}…` : `Promote to ${env.name}`}
                        </button>
                      ))}
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

/** Each environment, the version it runs and its last promotion. */
function Environments({ envs }: { envs: EnvState[] }) {
  return (
    <ul className="environments small" aria-label="environments">
      {envs.map((env) => (
        <li key={env.name} data-env={env.name} data-version={env.version ?? ""}>
          <span className="badge badge-env">{env.name}</span> {env.version ? <code title={env.version}>{short(env.version)}</code> : <span className="muted">no version yet</span>}
          {env.first && <span className="muted"> · saving lands here</span>}
          {env.gate && <span className="muted"> · gated by the test cases</span>}
          {env.schedules && <span className="muted"> · runs the schedules</span>}
          {env.last && (
            <span className="muted" title={new Date(env.last.at).toLocaleString()}>
              {" "}
              · promoted by {env.last.by} {fromNow(env.last.at)}
            </span>
          )}
        </li>
      ))}
    </ul>
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
