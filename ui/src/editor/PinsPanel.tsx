// Pinned data in the side panel: the Test run tab's list of pinned nodes (unpin, edit,
// show on the canvas), the "Pin this output" button of a step's checkpoint, and a line in
// the Chat tab. The editor provides the pins through PinsContext; flow/pins.ts decides.
import { createContext, useContext, useState } from "react";
import type { Checkpoint } from "../api/types";
import { canPin, editPin, isPinnedFrom, jsonText, pinOf, pinSource, pinsToSend, type Pins, type StoredPin } from "../flow/pins";
import type { FlowDocument } from "../flow/types";
import type { PinStore } from "./pins";
import { TextArea } from "./TextArea";

export interface PinsContextValue {
  store: PinStore;
  pins: Pins;
  doc: FlowDocument;
  /** Selects a node on the canvas. */
  select: (node: string) => void;
}

export const PinsContext = createContext<PinsContextValue | undefined>(undefined);

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The Test run tab's list of pinned nodes; nothing while there are none. */
export function PinnedList() {
  const ctx = useContext(PinsContext);
  const [editing, setEditing] = useState<string | undefined>();
  if (!ctx) return null;
  const { store, pins, doc, select } = ctx;
  const entries = Object.entries(pins);
  if (entries.length === 0) return null;
  const skipped = new Map(pinsToSend(pins, doc).skipped.map((s) => [s.node, s.why]));
  const used = entries.length - skipped.size;
  return (
    <section className="pinned-panel" id="pinned" aria-label="pinned nodes">
      <h3>
        Pinned <span className="badge badge-pinned">{entries.length}</span>
      </h3>
      <p className="muted small">
        {used > 0
          ? `Test runs and chat turns started here give back ${used === 1 ? "this node’s pinned output" : "these nodes’ pinned outputs"} instead of running ${used === 1 ? "it" : "them"}: no model or HTTP call.`
          : "No pin is used: see why below."}{" "}
        Pins live in this browser, never in the flow.
      </p>
      <ul className="pin-list">
        {entries.map(([node, p]) => (
          <li key={node} data-pin={node}>
            <div className="pin-head">
              <button type="button" className="link" onClick={() => select(node)} title="Show the node">
                {doc.nodes.find((n) => n.id === node)?.label || node}
              </button>
              <span className="muted small">{pinSource(p)}</span>
              <button type="button" className="link pin-edit" onClick={() => setEditing(editing === node ? undefined : node)} aria-expanded={editing === node}>
                {editing === node ? "Close" : "Edit"}
              </button>
              <button type="button" className="unpin" onClick={() => store.unpin(node)} title={`Run ${node} again in the next test run`}>
                Unpin
              </button>
            </div>
            {skipped.has(node) && <p className="field-problem">not used: {skipped.get(node)}</p>}
            {editing === node && <PinEditor pin={p} onSave={(next) => {
                  store.pin(node, next);
                  setEditing(undefined);
                }} />}
          </li>
        ))}
      </ul>
      {entries.length > 1 && (
        <button type="button" onClick={() => store.clear()} id="unpin-all">
          Unpin all
        </button>
      )}
    </section>
  );
}

/** Edits a pin's output and update as JSON. */
function PinEditor({ pin, onSave }: { pin: StoredPin; onSave: (p: StoredPin) => void }) {
  const [output, setOutput] = useState(() => jsonText(pin.output));
  const [update, setUpdate] = useState(() => jsonText(pin.update));
  const [error, setError] = useState<string | undefined>();
  const rows = (t: string) => Math.min(Math.max(t.split("\n").length, 2), 10);
  return (
    <form
      className="pin-editor"
      onSubmit={(e) => {
        e.preventDefault();
        const r = editPin(pin, output, update, Date.now());
        if ("error" in r) setError(r.error);
        else onSave(r.pin);
      }}
    >
      <label>
        Output
        <TextArea className="code" data-field="output" rows={rows(output)} spellCheck={false} value={output} onText={setOutput} />
      </label>
      <label>
        Update (merged into the state)
        <TextArea className="code" data-field="update" rows={rows(update)} spellCheck={false} value={update} onText={setUpdate} />
      </label>
      {pin.ports && <p className="muted small">chooses the ports {pin.ports.join(", ")}</p>}
      {error && <p className="field-problem">{error}</p>}
      <button type="submit" className="primary">
        Save pin
      </button>
    </form>
  );
}

/** A step's checkpoint: pin its output for the next test runs, or say it is the pin. */
export function PinButton({ run, ckpt }: { run: string; ckpt: Checkpoint }) {
  const ctx = useContext(PinsContext);
  if (!ctx || !canPin(ckpt, ctx.doc)) return null;
  const { store, pins, doc } = ctx;
  const node = doc.nodes.find((n) => n.id === ckpt.node)!;
  if (isPinnedFrom(pins, ckpt, run)) {
    return (
      <div className="pin-action">
        <span className="badge badge-pinned">pinned</span>
        <span className="muted small">Test runs give back this output instead of running “{node.id}”.</span>
        <button type="button" className="unpin" onClick={() => store.unpin(node.id)}>
          Unpin
        </button>
      </div>
    );
  }
  const other = pins[node.id];
  return (
    <div className="pin-action">
      <button
        type="button"
        className="pin-this"
        onClick={() => store.pin(node.id, pinOf(ckpt, run, node.type, Date.now()))}
        title={`Test runs and chat turns from this editor give back this output, update and ports instead of running “${node.id}” (n8n’s pinned data)`}
      >
        {other ? "Pin this output instead" : "Pin this output"}
      </button>
      {other && <span className="muted small">pinned now: {pinSource(other)}</span>}
    </div>
  );
}

/** A line for panels that start runs (the Chat tab): how many pins its runs use. */
export function PinnedNote() {
  const ctx = useContext(PinsContext);
  if (!ctx) return null;
  const n = Object.keys(pinsToSend(ctx.pins, ctx.doc).pins ?? {}).length;
  if (n === 0) return null;
  return (
    <p className="pinned-note small" id="pinned-note">
      {plural(n, "node is", "nodes are")} pinned: {n === 1 ? "it gives" : "they give"} back {n === 1 ? "its" : "their"} pinned output (see the Test run tab).
    </p>
  );
}
