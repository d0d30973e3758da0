// The test-run panel: input, run, live status, approvals, the output, and the
// checkpoints of the node selected on the canvas.
import { useEffect, useState } from "react";
import { api, ApiError } from "../api/client";
import type { Checkpoint, Run } from "../api/types";
import type { Change } from "../flow/diff";
import { finished, formatCost, formatDuration, runUsage, type RunView } from "../flow/runview";
import { exampleInput } from "../flow/schema";
import type { FlowDocument, JSONSchema } from "../flow/types";
import type { TestRunState } from "./testrun";

interface Props {
  doc: FlowDocument;
  state: TestRunState;
  selectedNode: string | undefined;
  canRun: boolean;
  runLabel: string;
  onRun: (input: unknown) => void;
  onCancel: () => void;
  onResume: (node: string, decision: { decision: "approve" | "reject"; value?: unknown; comment?: string }) => void;
  onSelect: (node: string) => void;
}

function initialInput(doc: FlowDocument): string {
  const input = doc.nodes.find((n) => n.type === "input");
  return JSON.stringify(exampleInput(input?.params?.example, input?.params?.schema as JSONSchema | undefined), null, 2);
}

export function RunPanel({ doc, state, selectedNode, canRun, runLabel, onRun, onCancel, onResume, onSelect }: Props) {
  const [text, setText] = useState(() => initialInput(doc));
  const [touched, setTouched] = useState(false);
  const inputNode = doc.nodes.find((n) => n.type === "input");
  useEffect(() => {
    if (!touched) setText(initialInput(doc));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [JSON.stringify(inputNode?.params ?? null)]);
  let parseError: string | undefined;
  let input: unknown;
  try {
    input = text.trim() === "" ? {} : JSON.parse(text);
  } catch (e) {
    parseError = (e as Error).message;
  }
  const { view, run, error, starting } = state;
  const active = !!view && !finished(view.status);
  return (
    <div className="run-panel">
      <label htmlFor="run-input">Input (JSON)</label>
      <textarea
        id="run-input"
        className="code"
        rows={Math.min(Math.max(text.split("\n").length, 3), 10)}
        spellCheck={false}
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          setTouched(true);
        }}
        aria-invalid={!!parseError}
      />
      {parseError && <p className="field-problem">not JSON: {parseError}</p>}
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
      {view && selectedNode && <NodeCheckpoints flow={doc.id} view={view} node={selectedNode} />}
      {view && !selectedNode && <p className="muted small">Select a node on the canvas to see its checkpoints in this run.</p>}
    </div>
  );
}

function RunSummary({ flow, view, run }: { flow: string; view: RunView; run: Run | undefined }) {
  const done = Object.values(view.nodes).filter((n) => n.status === "done").length;
  return (
    <section className="run-summary">
      <p>
        Run{" "}
        <a href={`/flows/${flow}/runs/${view.run}`} className="mono">
          {view.run}
        </a>{" "}
        <span className={`run-chip status-${view.status}`} id="run-status">
          {view.status}
        </span>
      </p>
      <p className="muted small">
        {done} {done === 1 ? "node" : "nodes"} done
        {run && ` · ${run.steps} steps`}
        {run && run.usage.input_tokens + run.usage.output_tokens > 0 && ` · ${run.usage.input_tokens}/${run.usage.output_tokens} tokens`}
        {costOfRun(view, run) && <span id="run-cost">{` · ${costOfRun(view, run)}`}</span>}
      </p>
      {(view.error || run?.error) && <p className="error">{run?.error ?? view.error}</p>}
    </section>
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
            {r ? <span className={`run-chip status-${r.status}`}>{r.status}</span> : <span className="muted small">not run</span>}
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
        <textarea className="code" rows={5} value={value} onChange={(e) => setValue(e.target.value)} aria-invalid={bad} />
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

function NodeCheckpoints({ flow, view, node }: { flow: string; view: RunView; node: string }) {
  const [list, setList] = useState<Checkpoint[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  const nr = view.nodes[node];
  const key = `${view.run}/${node}/${nr?.status}/${nr?.steps}/${view.status}`;
  useEffect(() => {
    let live = true;
    api
      .checkpoints(flow, view.run)
      .then((all) => live && setList(all.filter((c) => c.node === node)))
      .catch((e: unknown) => live && setError(e instanceof ApiError ? e.message : String(e)));
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  return (
    <section className="node-checkpoints" aria-label={`checkpoints of ${node}`}>
      <h3>“{node}” in this run</h3>
      {nr?.text && (
        <>
          <h4>Streamed text</h4>
          <pre className="stream">{nr.text}</pre>
        </>
      )}
      {error && <p className="error">{error}</p>}
      {list && list.length === 0 && <p className="muted small">No checkpoint yet: the node has not run in this run.</p>}
      {list?.map((c) => <CheckpointDetail key={c.id} flow={flow} run={view.run} ckpt={c} open={list.length === 1} />)}
    </section>
  );
}

function CheckpointDetail({ flow, run, ckpt, open }: { flow: string; run: string; ckpt: Checkpoint; open: boolean }) {
  const [full, setFull] = useState<Checkpoint | undefined>();
  const [changes, setChanges] = useState<Change[] | undefined>();
  const [isOpen, setOpen] = useState(open);
  useEffect(() => {
    if (!isOpen || full) return;
    void api.checkpoint(flow, run, ckpt.id).then(setFull).catch(() => undefined);
    if (ckpt.parent && ckpt.kind !== "turn") {
      void api.diff(flow, run, ckpt.id).then(setChanges).catch(() => undefined);
    }
  }, [isOpen, full, flow, run, ckpt]);
  return (
    <details className="checkpoint" open={isOpen} onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>
        step {ckpt.step} · {ckpt.kind} · {formatDuration(ckpt.duration_ms)}
        {ckpt.attempt && ckpt.attempt > 1 ? ` · attempt ${ckpt.attempt}` : ""}
      </summary>
      {!full && <p className="muted small">Loading…</p>}
      {full && (
        <div className="checkpoint-body">
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
