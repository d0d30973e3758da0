// Run this node alone: the working copy's node on a state the person gives, or on the
// state it received in the flow's latest run that reached it, without a run (n8n's
// "execute step"). The server runs it as a worker would and stores nothing.
import { useState } from "react";
import { ApiError, api } from "../api/client";
import type { Trial } from "../api/types";
import type { FlowDocument } from "../flow/types";
import { parseRunInput } from "./RunPanel";
import { TextArea } from "./TextArea";

export function TryNode({ doc, node, saved }: { doc: FlowDocument; node: string; saved: boolean }) {
  const [text, setText] = useState("{}");
  const [trial, setTrial] = useState<Trial | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const { input, error: parseError } = parseRunInput(text);
  const fail = (e: unknown) => setError(e instanceof ApiError ? e.message : String(e));

  // The state the node received the last time a run of the flow reached it.
  const fromLastRun = async () => {
    setError(undefined);
    try {
      for (const run of await api.listRuns(doc.id, 10)) {
        const cps = await api.checkpoints(doc.id, run.id);
        const cp = [...cps].reverse().find((c) => c.node === node && c.parent && c.kind !== "turn");
        if (cp?.parent) {
          const parent = await api.checkpoint(doc.id, run.id, cp.parent);
          setText(JSON.stringify(parent.state ?? {}, null, 2));
          return;
        }
      }
      setError("No recent run reached this node.");
    } catch (e) {
      fail(e);
    }
  };
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setTrial(await api.tryNode(doc, node, input));
    } catch (e) {
      setTrial(undefined);
      fail(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <details className="try-node" aria-label="run this node alone">
      <summary>Run this node alone</summary>
      <p className="muted small">Runs this node of the flow as it is here (saved or not) on the state below, without a run: nothing is stored.</p>
      <TextArea id="try-state" className="code" rows={5} spellCheck={false} value={text} onText={setText} aria-label="State for the node" aria-invalid={!!parseError} />
      {parseError && <p className="field-problem">not JSON: {parseError}</p>}
      <div className="actions">
        <button type="button" id="try-run" className="primary" disabled={busy || !!parseError} onClick={() => void run()}>
          {busy ? "Running…" : "Run node"}
        </button>
        <button type="button" id="try-from-run" disabled={!saved} title={saved ? "" : "A flow never saved has no runs"} onClick={() => void fromLastRun()}>
          Use the input of the last run
        </button>
      </div>
      {error && (
        <p className="error small" role="alert">
          {error}
        </p>
      )}
      {trial && (
        <div className="try-result" id="try-result">
          {trial.error ? (
            <p className="error" id="try-error">
              {trial.error}
              {trial.retryable ? " (a run would retry it)" : ""}
            </p>
          ) : (
            <>
              <h4>Output</h4>
              <pre className="code" id="try-output">
                {JSON.stringify(trial.output, null, 2)}
              </pre>
              {trial.update && (
                <>
                  <h4>Update</h4>
                  <pre className="code">{JSON.stringify(trial.update, null, 2)}</pre>
                </>
              )}
              <p className="muted small">
                {trial.waits ? `It would wait for a person: ${trial.waits}` : trial.next.length ? `Next: ${trial.next.join(", ")}` : "No node follows."}
                {" · "}
                {trial.duration_ms.toFixed(1)} ms
                {trial.usage.input_tokens || trial.usage.output_tokens ? ` · ${trial.usage.input_tokens + trial.usage.output_tokens} tokens` : ""}
              </p>
            </>
          )}
        </div>
      )}
    </details>
  );
}
