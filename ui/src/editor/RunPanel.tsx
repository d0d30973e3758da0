// The test-run panel: input, run, live status, approvals, the output, and the
// checkpoints of the node selected on the canvas.
import { useEffect, useState } from "react";
import { api, ApiError } from "../api/client";
import type { Checkpoint, DeadLetter, Run } from "../api/types";
import { checkpointTitle, turnNumbers } from "../flow/checkpoints";
import { formatTime } from "../flow/time";
import type { Change } from "../flow/diff";
import { finished, formatCost, formatDuration, runError, runUsage, type RunView } from "../flow/runview";
import { attachFiles } from "../flow/files";
import { exampleInput } from "../flow/schema";
import type { FlowDocument, JSONSchema } from "../flow/types";
import type { TestRunState } from "./testrun";
import { PinButton, PinnedList } from "./PinsPanel";
import { TextArea } from "./TextArea";

interface Props {
  doc: FlowDocument;
  state: TestRunState;
  selectedNode: string | undefined;
  canRun: boolean;
  /** Why the flow cannot run, shown by the run button. */
  blocked?: string | undefined;
  runLabel: string;
  /** The input field's text, kept by the editor (Ctrl+Enter runs with it from anywhere). */
  input: string;
  onInput: (text: string) => void;
  onRun: (input: unknown) => void;
  onCancel: () => void;
  onResume: (node: string, decision: { decision: "approve" | "reject"; value?: unknown; comment?: string }) => void;
  onSelect: (node: string) => void;
  /** Opens another run of the flow on the canvas. */
  onOpen: (run: string) => void;
  /** The saved file's text: when it changes (Ctrl+S), a failed step's Retry offers the new version. */
  published?: string;
}

/** The input a test run starts with: the input node's example, else a skeleton of its schema. */
export function initialInput(doc: FlowDocument): string {
  const input = doc.nodes.find((n) => n.type === "input");
  return JSON.stringify(exampleInput(input?.params?.example, input?.params?.schema as JSONSchema | undefined), null, 2);
}

/** The run input the field's text holds (empty: {}), or why it is not JSON. */
export function parseRunInput(text: string): { input: unknown; error?: undefined } | { input?: undefined; error: string } {
  try {
    return { input: text.trim() === "" ? {} : (JSON.parse(text) as unknown) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

export function RunPanel({ doc, state, selectedNode, canRun, blocked, runLabel, input: text, onInput, onRun, onCancel, onResume, onSelect, onOpen, published }: Props) {
  const { input, error: parseError } = parseRunInput(text);
  const { view, run, error, starting } = state;
  const active = !!view && !finished(view.status);
  const [uploading, setUploading] = useState(false);
  const [uploadError, setUploadError] = useState<string | undefined>();
  // Files are uploaded at once and the input gets their references: a run carries a
  // file by reference, never its bytes.
  const attach = async (list: FileList | null) => {
    if (!list || list.length === 0) return;
    setUploading(true);
    setUploadError(undefined);
    try {
      const refs = [];
      for (const f of Array.from(list)) refs.push(await api.uploadFile(doc.id, f));
      const schema = doc.nodes.find((n) => n.type === "input")?.params?.schema as JSONSchema | undefined;
      onInput(JSON.stringify(attachFiles(parseError ? {} : input, refs, schema), null, 2));
    } catch (e) {
      setUploadError(e instanceof ApiError && e.status === 404 ? "Save the flow first: files belong to a saved flow." : (e as Error).message);
    } finally {
      setUploading(false);
    }
  };
  return (
    <div className="run-panel">
      <RunPicker recent={state.recent} current={view?.run} onOpen={onOpen} />
      <label htmlFor="run-input">Input (JSON)</label>
      <TextArea
        id="run-input"
        className="code"
        rows={Math.min(Math.max(text.split("\n").length, 3), 10)}
        spellCheck={false}
        value={text}
        onText={onInput}
        aria-invalid={!!parseError}
        title="Ctrl+Enter runs the flow with this input"
      />
      {parseError && <p className="field-problem">not JSON: {parseError}</p>}
      <div className="run-files small">
        <label className="button">
          {uploading ? "Uploading…" : "Attach files"}
          <input type="file" id="run-attach" multiple hidden disabled={uploading} onChange={(e) => void attach(e.target.files).then(() => (e.target.value = ""))} />
        </label>{" "}
        <label className="button">
          Attach a folder
          <input type="file" id="run-attach-folder" multiple hidden disabled={uploading} {...{ webkitdirectory: "" }} onChange={(e) => void attach(e.target.files).then(() => (e.target.value = ""))} />
        </label>
        {uploadError && (
          <span className="field-problem" role="alert" id="run-attach-error">
            {" "}
            {uploadError}
          </span>
        )}
      </div>
      <div className="actions">
        <button type="button" className="primary" id="run-button" disabled={!canRun || !!parseError || starting || active} onClick={() => onRun(input)}>
          {starting ? "Starting…" : runLabel}
        </button>
        {active && (
          <button type="button" onClick={onCancel}>
            Cancel run
          </button>
        )}
      </div>
      <PinnedList />
      {blocked && (
        <p className="run-blocked" id="run-blocked">
          {blocked}
        </p>
      )}
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
      {view && <RunSummary flow={doc.id} view={view} run={run} />}
      {view && <NodeStatuses doc={doc} view={view} onSelect={onSelect} selected={selectedNode} />}
      {run?.waiting &&
        view?.status === "waiting" &&
        Object.entries(run.waiting).map(([node, w]) => <Approval key={node} node={node} prompt={w.prompt ?? ""} data={w.data} onResume={onResume} />)}
      {view && run && finished(view.status) && run.status === "succeeded" && (
        <section className="run-output">
          <h3>Output</h3>
          <pre className="code" id="run-output">
            {JSON.stringify(run.output, null, 2)}
          </pre>
        </section>
      )}
      {view && selectedNode && <NodeCheckpoints flow={doc.id} view={view} node={selectedNode} published={published ?? ""} />}
      {view && !selectedNode && <p className="muted small">Select a node on the canvas to see its checkpoints in this run.</p>}
    </div>
  );
}

/** The nodes where the run waits for a worker nobody runs. */
export function noWorkerAt(view: RunView): string[] {
  return Object.entries(view.nodes)
    .filter(([, n]) => n.noWorker)
    .map(([id]) => id);
}

/** Any run of the flow, to open on the canvas: the latest ones, newest first. */
function RunPicker({ recent, current, onOpen }: { recent: Run[]; current: string | undefined; onOpen: (run: string) => void }) {
  const known = current === undefined || recent.some((r) => r.id === current);
  return (
    <div className="run-picker field">
      <label htmlFor="run-picker">Show a run on the canvas</label>
      <select id="run-picker" value={current ?? ""} onChange={(e) => e.target.value && onOpen(e.target.value)}>
        <option value="">{recent.length ? "choose one of the latest runs…" : "no runs yet"}</option>
        {!known && <option value={current}>{current}</option>}
        {recent.map((r) => (
          <option key={r.id} value={r.id}>
            {formatTime(r.created_at)} · {r.status}{r.environment ? ` · ${r.environment}` : ""} · {r.id}
          </option>
        ))}
      </select>
    </div>
  );
}

function RunSummary({ flow, view, run }: { flow: string; view: RunView; run: Run | undefined }) {
  const done = Object.values(view.nodes).filter((n) => n.status === "done").length;
  return (
    <section className="run-summary" id="run-summary">
      <p>
        Run{" "}
        <a href={`/flows/${flow}/runs/${view.run}`} className="mono" id="run-summary-id">
          {view.run}
        </a>{" "}
        <span className={`run-chip status-${view.status}`} id="run-status">
          {view.status}
        </span>
        {run?.environment && (
          <span className="badge badge-env" id="run-summary-environment" title={`started on ${run.environment}'s version`}>
            {run.environment}
          </span>
        )}
      </p>
      <p className="muted small">
        {done} {done === 1 ? "node" : "nodes"} done
        {run && ` · ${run.steps} ${run.steps === 1 ? "step" : "steps"}`}
        {run && run.usage.input_tokens + run.usage.output_tokens > 0 && ` · ${run.usage.input_tokens}/${run.usage.output_tokens} tokens`}
        {costOfRun(view, run) && <span id="run-cost">{` · ${costOfRun(view, run)}`}</span>}
      </p>
      {runError(view, run) && <p className="error">{runError(view, run)}</p>}
      {run?.moves && run.moves.length > 0 && (
        <ul className="run-moves small" id="run-moves" aria-label="moves to other versions">
          {run.moves.map((m, i) => (
            <li key={i}>
              moved from <code>{m.from.slice(0, 7)}</code> to <code>{m.to.slice(0, 7)}</code> at <span className="mono">{m.node}</span>
              {m.waiting ? " while waiting" : m.attempt ? ` (attempt ${m.attempt})` : ""}
              {m.by ? ` by ${m.by}` : ""} · <time dateTime={new Date(m.at).toISOString()}>{formatTime(new Date(m.at).toISOString())}</time>
            </li>
          ))}
        </ul>
      )}
      {run?.replay_of && <ReplayOf flow={flow} run={run} />}
      {noWorkerAt(view).length > 0 && (
        <p className="run-blocked" id="no-worker-note">
          Queued — no worker serves this flow’s version: nothing reads {noWorkerAt(view).join(", ")}. Start one with <code>sluice worker {flow}.json</code> (or <code>sluice serve</code> with workers); the run then goes on.
        </p>
      )}
    </section>
  );
}

/** A replay: the run it replays and, once it finished, how it compares node by node. */
function ReplayOf({ flow, run }: { flow: string; run: Run }) {
  const [summary, setSummary] = useState<string | undefined>();
  const done = finished(run.status);
  useEffect(() => {
    if (!done) return;
    let live = true;
    api
      .compare(flow, run.id)
      .then((c) => live && setSummary(c.summary))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [flow, run.id, done]);
  return (
    <p className="muted small" id="run-replay-of">
      replay of{" "}
      <a className="mono" href={`/flows/${flow}/runs/${run.replay_of}`}>
        {run.replay_of}
      </a>
      {summary && (
        <>
          {" · "}
          <a href={`/flows/${flow}/runs/${run.id}`} id="run-compare-summary" title="compared with the run it replays, node by node">
            {summary}
          </a>
        </>
      )}
    </p>
  );
}

/** The run's estimated cost: what its model calls spent (failed attempts too), else the sum over its nodes. */
function costOfRun(view: RunView, run: Run | undefined): string {
  return formatCost(run?.spend?.usd || runUsage(view).cost_usd);
}

/** Every node's status in the run, as a list: the canvas's run view for keyboards and screen readers. */
function NodeStatuses({ doc, view, onSelect, selected }: { doc: FlowDocument; view: RunView; onSelect: (node: string) => void; selected: string | undefined }) {
  return (
    <ul className="node-statuses" aria-label="nodes in this run">
      {doc.nodes.map((n) => {
        const r = view.nodes[n.id];
        return (
          <li key={n.id} className={n.id === selected ? "selected" : ""}>
            <button type="button" className="link" onClick={() => onSelect(n.id)}>
              {n.label || n.id}
            </button>
            {r ? <span className={`run-chip status-${r.status}`}>{r.calls !== undefined ? `called ${r.calls}×` : r.status}</span> : <span className="muted small">not run</span>}
            {r?.pinned && <span className="run-chip run-pinned" title="it did not run: it gave back its pinned output">pinned</span>}
            {r?.durationMs !== undefined && <span className="muted small">{formatDuration(r.durationMs)}</span>}
            {r && r.tokens.input_tokens + r.tokens.output_tokens > 0 && (
              <span className="muted small">
                {r.tokens.input_tokens}/{r.tokens.output_tokens} tok
              </span>
            )}
            {r && formatCost(r.tokens.cost_usd) && <span className="muted small node-cost">{formatCost(r.tokens.cost_usd)}</span>}
          </li>
        );
      })}
    </ul>
  );
}

function Approval({ node, prompt, data, onResume }: { node: string; prompt: string; data: unknown; onResume: Props["onResume"] }) {
  const [value, setValue] = useState(data && typeof data === "object" ? JSON.stringify(data, null, 2) : "");
  const [comment, setComment] = useState("");
  let parsed: unknown;
  let bad = false;
  try {
    parsed = value.trim() === "" ? undefined : JSON.parse(value);
    bad = parsed !== undefined && (typeof parsed !== "object" || Array.isArray(parsed) || parsed === null);
  } catch {
    bad = true;
  }
  const original = data && typeof data === "object" ? JSON.stringify(data) : "";
  const edited = parsed !== undefined && JSON.stringify(parsed) !== original ? parsed : undefined;
  const decide = (decision: "approve" | "reject") => {
    const d: { decision: "approve" | "reject"; value?: unknown; comment?: string } = { decision };
    if (decision === "approve" && edited !== undefined) d.value = edited;
    if (comment) d.comment = comment;
    onResume(node, d);
  };
  return (
    <section className="approval" aria-label={`approval at ${node}`}>
      <h3>Waiting for you at “{node}”</h3>
      <p className="approval-prompt">{prompt}</p>
      <label>
        Data to review (edit it to approve with changes)
        <TextArea className="code" rows={5} value={value} onText={setValue} aria-invalid={bad} />
      </label>
      {bad && <p className="field-problem">an edited value is a JSON object</p>}
      <label>
        Comment
        <input value={comment} onChange={(e) => setComment(e.target.value)} />
      </label>
      <div className="actions">
        <button type="button" className="primary" disabled={bad} onClick={() => decide("approve")}>
          Approve
        </button>
        <button type="button" onClick={() => decide("reject")}>
          Reject
        </button>
      </div>
    </section>
  );
}

function NodeCheckpoints({ flow, view, node, published }: { flow: string; view: RunView; node: string; published: string }) {
  const [list, setList] = useState<Checkpoint[] | undefined>();
  const [dead, setDead] = useState<DeadLetter[]>([]);
  const [error, setError] = useState<string | undefined>();
  const [reload, setReload] = useState(0);
  const nr = view.nodes[node];
  const key = `${view.run}/${node}/${nr?.status}/${nr?.steps}/${nr?.attempt}/${view.status}/${reload}`;
  useEffect(() => {
    let live = true;
    api
      .checkpoints(flow, view.run)
      .then((all) => live && setList(all.filter((c) => c.node === node)))
      .catch((e: unknown) => live && setError(e instanceof ApiError ? e.message : String(e)));
    api
      .deadLetters(flow)
      .then((all) => live && setDead(all.filter((d) => d.run === view.run && d.node === node)))
      .catch(() => undefined);
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  const failed = list?.filter((c) => c.kind === "error") ?? [];
  const steps = list?.filter((c) => c.kind !== "error") ?? [];
  const turns = turnNumbers(steps);
  return (
    <section className="node-checkpoints" aria-label={`checkpoints of ${node}`}>
      <h3>“{node}” in this run</h3>
      {nr?.calls !== undefined && (
        <p className="muted small">
          A tool: the agent called it {nr.calls} {nr.calls === 1 ? "time" : "times"}; each call is a turn of the agent’s step.
        </p>
      )}
      {nr?.text && (
        <>
          <h4>Streamed text</h4>
          <pre className="stream">{nr.text}</pre>
        </>
      )}
      {error && <p className="error">{error}</p>}
      {list && list.length === 0 && nr?.calls === undefined && <p className="muted small">No checkpoint yet: the node has not run in this run.</p>}
      {(failed.length > 0 || dead.length > 0) && <FailedStep flow={flow} run={view.run} attempts={failed} dead={dead} published={published} onChange={() => setReload((n) => n + 1)} />}
      {steps.map((c) => (
        <CheckpointDetail key={c.id} flow={flow} run={view.run} ckpt={c} title={checkpointTitle(c, turns.get(c.id))} open={steps.length === 1} />
      ))}
    </section>
  );
}

/** A step that failed: the state it received, each attempt with its time and error, its dead letter with retry. */
function FailedStep({ flow, run, attempts, dead, published, onChange }: { flow: string; run: string; attempts: Checkpoint[]; dead: DeadLetter[]; published: string; onChange: () => void }) {
  const [received, setReceived] = useState<unknown>();
  // The flow's current version (what a new run starts on): a retry can run the step on it.
  const [current, setCurrent] = useState<string | undefined>();
  useEffect(() => {
    let live = true;
    api
      .versions(flow)
      .then((h) => live && setCurrent(h.current))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [flow, published]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const parent = attempts[attempts.length - 1]?.parent ?? dead[0]?.checkpoint;
  useEffect(() => {
    if (!parent) return;
    let live = true;
    api
      .checkpoint(flow, run, parent)
      .then((c) => live && setReceived(c.state))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [flow, run, parent]);
  const act = async (f: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await f();
      setError(undefined);
      onChange();
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="failed-step">
      <h4>{attempts.length === 1 ? "1 failed attempt" : `${attempts.length} failed attempts`}</h4>
      <ol className="attempts">
        {attempts.map((c) => (
          <li key={c.id} className="attempt">
            <span className="attempt-head">
              attempt {c.attempt ?? "?"} · <time dateTime={c.time}>{formatTime(c.time)}</time>
              {c.worker && <span className="muted"> · {c.worker}</span>}
            </span>
            <pre className="attempt-error">{c.error}</pre>
          </li>
        ))}
      </ol>
      {dead.map((d) => (
        <div key={d.id} className="dead-letter">
          <p>
            <strong>
              dead letter after {d.attempts} {d.attempts === 1 ? "attempt" : "attempts"}
            </strong>{" "}
            · <time dateTime={d.time}>{formatTime(d.time)}</time>: the step will not run again unless you retry it.
          </p>
          <div className="actions">
            {current && current !== d.version && (
              <button type="button" className="primary retry retry-current" disabled={busy} title={`run the step on the flow's current version ${current}`} onClick={() => void act(() => api.retryDead(flow, d.id, "current"))}>
                Retry with the current version ({current.slice(0, 7)})
              </button>
            )}
            <button type="button" className={`retry retry-original${current && current !== d.version ? "" : " primary"}`} disabled={busy} title={`run the step on the version it ran, ${d.version}`} onClick={() => void act(() => api.retryDead(flow, d.id, "original"))}>
              {current && current !== d.version ? `Retry as it was (${d.version.slice(0, 7)})` : `Retry (${d.version.slice(0, 7)}, the current version)`}
            </button>
            <button type="button" className="danger" disabled={busy} onClick={() => confirm("Discard this dead letter? The run stays failed.") && void act(() => api.discardDead(flow, d.id))}>
              Discard
            </button>
          </div>
        </div>
      ))}
      {error && <p className="error">{error}</p>}
      <h4>State it received</h4>
      {received === undefined ? <p className="muted small">{parent ? "Loading…" : "not recorded"}</p> : <pre className="code received">{JSON.stringify(received, null, 2)}</pre>}
    </div>
  );
}

function CheckpointDetail({ flow, run, ckpt, title, open }: { flow: string; run: string; ckpt: Checkpoint; title: string; open: boolean }) {
  const [full, setFull] = useState<Checkpoint | undefined>();
  const [changes, setChanges] = useState<Change[] | undefined>();
  const [received, setReceived] = useState<{ state: unknown } | undefined>();
  const [isOpen, setOpen] = useState(open);
  useEffect(() => {
    if (!isOpen || full) return;
    void api.checkpoint(flow, run, ckpt.id).then(setFull).catch(() => undefined);
    if (ckpt.parent) {
      // The state the step started from: its parent checkpoint's (what a failed step shows too).
      void api
        .checkpoint(flow, run, ckpt.parent)
        .then((c) => setReceived({ state: c.state }))
        .catch(() => undefined);
    }
    if (ckpt.parent && ckpt.kind !== "turn") {
      void api.diff(flow, run, ckpt.id).then(setChanges).catch(() => undefined);
    }
  }, [isOpen, full, flow, run, ckpt]);
  return (
    <details className="checkpoint" open={isOpen} onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>{title}</summary>
      {!full && <p className="muted small">Loading…</p>}
      {full && (
        <div className="checkpoint-body">
          <PinButton run={run} ckpt={full} />
          {received && received.state !== undefined && (
            <>
              <h4>State it received</h4>
              <pre className="code received">{JSON.stringify(received.state, null, 2)}</pre>
            </>
          )}
          {full.update !== undefined && <Json title="Update" value={full.update} />}
          {full.output !== undefined && <Json title="Output" value={full.output} />}
          {changes && (
            <>
              <h4>Changes to the state</h4>
              {changes.length === 0 ? (
                <p className="muted small">none</p>
              ) : (
                <ul className="diff">
                  {changes.map((ch, i) => (
                    <li key={i} className={`diff-${ch.op}`}>
                      <code>{ch.path}</code> {ch.op === "add" ? `= ${short(ch.to)}` : ch.op === "remove" ? `removed (was ${short(ch.from)})` : `${short(ch.from)} → ${short(ch.to)}`}
                    </li>
                  ))}
                </ul>
              )}
            </>
          )}
          {full.state !== undefined && <Json title="State after this step" value={full.state} />}
        </div>
      )}
    </details>
  );
}

function Json({ title, value }: { title: string; value: unknown }) {
  return (
    <>
      <h4>{title}</h4>
      <pre className="code">{JSON.stringify(value, null, 2)}</pre>
    </>
  );
}

function short(v: unknown): string {
  const s = JSON.stringify(v);
  return s === undefined ? "nothing" : s.length > 80 ? s.slice(0, 79) + "…" : s;
}
