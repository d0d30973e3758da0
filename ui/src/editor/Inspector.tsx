// The inspector: the form of the selected node (its parameters generated from the
// component's JSON Schema, plus the fields every node has), of the selected edge, or of
// the flow itself when nothing is selected.
import { useEffect, useId, useState } from "react";
import { canvasEdgeIds, fromPort, toPort } from "../flow/edges";
import { validId } from "../flow/ids";
import { checkConnection } from "../flow/connect";
import { connect, removeItems, renameNode, renamePort, setNodeField, setParam, updateEdge } from "../flow/ops";
import { portsOf } from "../flow/ports";
import { problemField } from "../flow/problems";
import { fieldOf, fieldsOf, isEnvRef } from "../flow/schema";
import { NOTE_COLORS, noteIdOf, removeNotes, updateNote } from "../flow/notes";
import { BUDGET_FIELDS, budgetOf, offeredOverMCP, withBudget, withMCP } from "../flow/settings";
import type { FlowDocument, FlowNode, Note, NoteColor, Problem, Registry } from "../flow/types";
import { FieldRow, ParamField } from "./fields";
import { MCPTools } from "./MCPTools";
import { TryNode } from "./TryNode";
import type { EditorStore } from "./store";
import { TextArea } from "./TextArea";

interface Props {
  store: EditorStore;
  doc: FlowDocument;
  reg: Registry;
  problems: { byNode: Map<string, Problem[]>; byEdge: Map<string, Problem[]>; general: Problem[] };
  selectedNodes: Set<string>;
  selectedEdges: Set<string>;
  isNew: boolean;
}

// Suggestions: flows may read SLUICE_SECRET_* (and what the server allows with --secrets).
const COMMON_ENV = ["SLUICE_SECRET_OPENAI_KEY", "SLUICE_SECRET_ANTHROPIC_KEY", "SLUICE_SECRET_GITHUB_TOKEN", "SLUICE_SECRET_SLACK_TOKEN"];

export function Inspector({ store, doc, reg, problems, selectedNodes, selectedEdges, isNew }: Props) {
  if (selectedNodes.size === 1 && selectedEdges.size === 0) {
    const noteId = noteIdOf([...selectedNodes][0]!);
    const note = noteId !== undefined ? doc.notes?.find((n) => n.id === noteId) : undefined;
    if (note) return <NoteInspector key={note.id} store={store} note={note} />;
  }
  if (selectedNodes.size === 1) {
    const node = doc.nodes.find((n) => selectedNodes.has(n.id));
    if (node) return <NodeInspector key={node.id} store={store} doc={doc} reg={reg} node={node} problems={problems.byNode.get(node.id) ?? []} isNew={isNew} />;
  }
  if (selectedEdges.size === 1 && selectedNodes.size === 0) {
    const id = [...selectedEdges][0]!;
    const i = canvasEdgeIds(doc.edges).indexOf(id);
    if (i >= 0) return <EdgeInspector store={store} doc={doc} canvasId={id} problems={problems.byEdge.get(id) ?? []} />;
  }
  if (selectedNodes.size + selectedEdges.size > 1) {
    return (
      <div className="inspector">
        <h2>{selectedNodes.size} nodes, {selectedEdges.size} edges selected</h2>
        <p className="muted">Delete, copy or move them together; select one to edit it.</p>
      </div>
    );
  }
  return <FlowInspector store={store} doc={doc} isNew={isNew} />;
}

function NodeInspector({ store, doc, reg, node, problems, isNew }: { store: EditorStore; doc: FlowDocument; reg: Registry; node: FlowNode; problems: Problem[]; isNew: boolean }) {
  const spec = reg.get(node.type);
  const fields = fieldsOf(spec?.params);
  const seal = () => store.seal();
  const problemsOf = (param?: string, field?: string) =>
    problems.filter((p) => {
      const f = problemField(p);
      return param ? f.param === param : f.field === field;
    }).map((p) => p.message);
  const placed = new Set<Problem>();
  fields.forEach((f) => problems.forEach((p) => problemField(p).param === f.name && placed.add(p)));
  ["input", "output", "timeout", "concurrency", "label", "id"].forEach((k) => problems.forEach((p) => problemField(p).field === k && placed.add(p)));
  const loose = problems.filter((p) => !placed.has(p));
  const envNames = [...new Set([...doc.nodes.flatMap((n) => Object.values(n.params ?? {}).filter(isEnvRef).map((r) => r.$env)), ...COMMON_ENV])];

  const setP = (name: string, v: unknown) => {
    const routes = spec?.route_ports === name;
    store.edit((d) => {
      let next = setParam(d, node.id, name, v);
      if (routes) {
        const before = Object.keys((node.params?.[name] as object | undefined) ?? {});
        const after = Object.keys((v as object | undefined) ?? {});
        if (before.length === after.length) before.forEach((k, i) => k !== after[i] && after[i] && (next = renamePort(next, node.id, k, after[i]!)));
      }
      return next;
    }, `${node.id}.params.${name}`);
  };
  const setF = <K extends keyof FlowNode>(key: K, v: FlowNode[K] | undefined) => store.edit((d) => setNodeField(d, node.id, key, v), `${node.id}.${String(key)}`);
  const jq = fieldOf("jq", { type: "string", format: "jq" }, false);
  const duration = fieldOf("timeout", { type: "string", format: "duration" }, false);

  return (
    <div className="inspector" aria-label={`node ${node.id}`}>
      <h2>
        {spec?.title ?? node.type} <span className="muted">node</span>
      </h2>
      {spec && <About text={spec.description} />}
      {loose.length > 0 && (
        <ul className="problem-list compact">
          {loose.map((p, i) => (
            <li key={i} className={`problem ${p.severity}`}>
              {p.message}
            </li>
          ))}
        </ul>
      )}
      <RenameField node={node} doc={doc} store={store} problems={problemsOf(undefined, "id")} />
      <FieldRow label="Label" help="Shown on the canvas instead of the id." problems={problemsOf(undefined, "label")}>
        <input aria-label="Label" value={node.label ?? ""} onChange={(e) => setF("label", e.target.value)} onBlur={seal} />
      </FieldRow>
      {fields.length > 0 && <h3>Parameters</h3>}
      {fields.map((f) => (
        <ParamField key={f.name} field={f} value={node.params?.[f.name]} problems={problemsOf(f.name)} onChange={(v) => setP(f.name, v)} onBlur={seal} envNames={envNames} />
      ))}
      {node.type === "mcp" && <MCPTools params={node.params ?? {}} />}
      {spec && spec.name !== "input" && <TryNode doc={doc} node={node.id} saved={!isNew} />}
      <details className="advanced">
        <summary>Input, output and limits</summary>
        <ParamField field={{ ...jq, name: "input", label: "Input selector", description: "What of the state the component sees (jq). Empty: the whole state." }} value={node.input} problems={problemsOf(undefined, "input")} onChange={(v) => setF("input", v as string | undefined)} onBlur={seal} />
        <ParamField field={{ ...jq, name: "output", label: "Output mapping", description: "jq from the component's output to the state update (an object)." }} value={node.output} problems={problemsOf(undefined, "output")} onChange={(v) => setF("output", v as string | undefined)} onBlur={seal} />
        <ParamField field={{ ...duration, label: "Timeout", description: "Deadline of one step; default the flow's step_timeout." }} value={node.timeout} problems={problemsOf(undefined, "timeout")} onChange={(v) => setF("timeout", v as string | undefined)} onBlur={seal} />
        <ParamField field={fieldOf("concurrency", { type: "integer", minimum: 1, maximum: 1024, description: "Steps of this node one worker runs at once (default 16)." }, false)} value={node.concurrency} problems={problemsOf(undefined, "concurrency")} onChange={(v) => setF("concurrency", v as number | undefined)} onBlur={seal} />
        <FieldRow label="Description" problems={[]}>
          <TextArea aria-label="Description" rows={2} value={node.description ?? ""} onText={(text) => setF("description", text)} onBlur={seal} />
        </FieldRow>
      </details>
      <h3>Ports</h3>
      <ConnectFrom doc={doc} reg={reg} node={node} store={store} />
      <Connections doc={doc} node={node} store={store} />
      <div className="actions">
        <button type="button" className="danger" onClick={() => store.edit((d) => removeItems(d, new Set([node.id]), new Set()))}>
          Delete node
        </button>
      </div>
    </div>
  );
}

/** A component's description: its first sentence, the rest on demand. */
function About({ text }: { text: string }) {
  const i = text.indexOf(". ");
  if (i < 0 || i > 160) return <p className="muted small">{text}</p>;
  return (
    <details className="about muted small">
      <summary>{text.slice(0, i + 1)}</summary>
      <p>{text.slice(i + 2)}</p>
    </details>
  );
}

function RenameField({ node, doc, store, problems }: { node: FlowNode; doc: FlowDocument; store: EditorStore; problems: string[] }) {
  const id = useId();
  const [draft, setDraft] = useState(node.id);
  useEffect(() => {
    setDraft(node.id);
  }, [node.id]);
  const taken = draft !== node.id && doc.nodes.some((n) => n.id === draft);
  const error = !validId(draft) ? "1 to 64 lower-case letters, digits, - and _" : taken ? `a node "${draft}" exists` : undefined;
  const commit = () => {
    if (!error && draft !== node.id) {
      store.edit((d) => renameNode(d, node.id, draft));
      store.select([draft]);
    } else setDraft(node.id);
  };
  return (
    <FieldRow label="Id" help="Names the node in edges, runs and Redis keys." problems={error ? [error, ...problems] : problems} htmlFor={id}>
      <input id={id} value={draft} onChange={(e) => setDraft(e.target.value)} onBlur={commit} onKeyDown={(e) => e.key === "Enter" && commit()} aria-invalid={!!error} />
    </FieldRow>
  );
}

/** Connecting from the keyboard: each output port offers the input ports it may connect to. */
function ConnectFrom({ doc, reg, node, store }: { doc: FlowDocument; reg: Registry; node: FlowNode; store: EditorStore }) {
  const outs = portsOf(node, reg.get(node.type)).filter((p) => p.direction === "out");
  if (outs.length === 0) return null;
  return (
    <div className="connect-from">
      {outs.map((p) => {
        const targets = doc.nodes.flatMap((n) =>
          portsOf(n, reg.get(n.type))
            .filter((q) => q.direction === "in")
            .map((q) => ({ from: node.id, port: p.name, to: n.id, to_port: q.name }))
            .filter((c) => checkConnection(doc, reg, c).ok),
        );
        return (
          <label key={p.name} className="field">
            <span className="small">Connect “{p.name}” to</span>
            <select
              value=""
              disabled={targets.length === 0}
              data-connect={p.name}
              onChange={(e) => {
                const c = targets[Number(e.target.value)];
                if (c) store.edit((d) => connect(d, c));
              }}
            >
              <option value="">{targets.length ? "choose an input port…" : "no compatible input port"}</option>
              {targets.map((c, i) => (
                <option key={i} value={i}>
                  {c.to}.{c.to_port}
                </option>
              ))}
            </select>
          </label>
        );
      })}
    </div>
  );
}

function Connections({ doc, node, store }: { doc: FlowDocument; node: FlowNode; store: EditorStore }) {
  const ids = canvasEdgeIds(doc.edges);
  const mine = doc.edges.map((e, i) => ({ e, id: ids[i]! })).filter(({ e }) => e.from === node.id || e.to === node.id);
  if (mine.length === 0) return <p className="muted small">Not connected: drag from a port on the canvas to another node’s port, or choose one above.</p>;
  return (
    <>
      <h3>Connections</h3>
      <ul className="connections">
        {mine.map(({ e, id }) => (
          <li key={id}>
            <button type="button" className="link" onClick={() => store.select([], [id])}>
              {e.from}.{fromPort(e)} → {e.to}.{toPort(e)}
            </button>
            {e.condition && <code className="small"> if {e.condition}</code>}
          </li>
        ))}
      </ul>
    </>
  );
}

function EdgeInspector({ store, doc, canvasId, problems }: { store: EditorStore; doc: FlowDocument; canvasId: string; problems: Problem[] }) {
  const e = doc.edges[canvasEdgeIds(doc.edges).indexOf(canvasId)]!;
  const jq = fieldOf("condition", { type: "string", format: "jq", description: "The edge is taken only when this jq over the state is true. Empty: always." }, false);
  return (
    <div className="inspector" aria-label={`edge ${canvasId}`}>
      <h2>
        Edge <span className="muted">{e.from}.{fromPort(e)} → {e.to}.{toPort(e)}</span>
      </h2>
      {problems.length > 0 && (
        <ul className="problem-list compact">
          {problems.map((p, i) => (
            <li key={i} className={`problem ${p.severity}`}>
              {p.message}
            </li>
          ))}
        </ul>
      )}
      <ParamField
        field={jq}
        value={e.condition}
        problems={[]}
        onChange={(v) => {
          store.edit((d) => updateEdge(d, canvasId, (x) => ({ ...x, condition: (v as string | undefined) ?? "" })), `${canvasId}.condition`);
        }}
        onBlur={() => store.seal()}
      />
      <div className="actions">
        <button type="button" className="danger" onClick={() => store.edit((d) => removeItems(d, new Set(), new Set([canvasId])))}>
          Delete edge
        </button>
      </div>
    </div>
  );
}

function NoteInspector({ store, note }: { store: EditorStore; note: Note }) {
  return (
    <div className="inspector" aria-label={`note ${note.id}`}>
      <h2>
        Note <span className="muted">{note.id}</span>
      </h2>
      <p className="muted small">Notes are layout, like positions: they never change the flow’s version and nothing runs them.</p>
      <FieldRow label="Text" problems={[]}>
        <TextArea aria-label="Note text" rows={5} value={note.text} onText={(text) => store.edit((d) => updateNote(d, note.id, { text }), `note:${note.id}.text`)} onBlur={() => store.seal()} />
      </FieldRow>
      <FieldRow label="Colour" problems={[]}>
        <select aria-label="Note colour" value={note.color ?? "yellow"} onChange={(e) => store.edit((d) => updateNote(d, note.id, { color: e.target.value as NoteColor }))}>
          {NOTE_COLORS.map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
      </FieldRow>
      <div className="actions">
        <button type="button" className="danger" onClick={() => store.edit((d) => removeNotes(d, new Set([note.id])))}>
          Delete note
        </button>
      </div>
    </div>
  );
}

function FlowInspector({ store, doc, isNew }: { store: EditorStore; doc: FlowDocument; isNew: boolean }) {
  const set = (patch: Partial<FlowDocument>, group: string) =>
    store.edit((d) => {
      const next = { ...d, ...patch };
      for (const k of ["name", "description"] as const) if (next[k] === "") delete next[k];
      return next;
    }, group);
  const json = fieldOf("settings", { type: "object", description: "max_steps, max_attempts, claim_after, step_timeout, checkpoint_ttl, keep_last, budget, mcp" }, false);
  const state = fieldOf("state", { type: "object", description: 'State keys and their reducers, e.g. {"log": {"reducer": "append"}}' }, false);
  return (
    <div className="inspector" aria-label="flow">
      <h2>Flow</h2>
      <p className="muted small">Select a node or an edge to edit it. These are the flow’s own settings.</p>
      <FieldRow label="Id" help={isNew ? "Set when the flow is first saved." : "The file name; cannot change."} problems={[]}>
        <input aria-label="Flow id" value={doc.id} readOnly={!isNew} onChange={(e) => store.edit((d) => ({ ...d, id: e.target.value }), "flow.id")} />
      </FieldRow>
      <FieldRow label="Name" problems={[]}>
        <input aria-label="Flow name" value={doc.name ?? ""} onChange={(e) => set({ name: e.target.value }, "flow.name")} onBlur={() => store.seal()} />
      </FieldRow>
      <FieldRow label="Description" problems={[]}>
        <TextArea aria-label="Flow description" rows={3} value={doc.description ?? ""} onText={(text) => set({ description: text }, "flow.description")} onBlur={() => store.seal()} />
      </FieldRow>
      <FlowSettings store={store} doc={doc} />
      <ParamField field={{ ...state, label: "State" }} value={doc.state} problems={[]} onChange={(v) => store.edit((d) => { const n = { ...d }; if (v === undefined) delete n.state; else n.state = v as FlowDocument["state"] & object; return n; }, "flow.state")} onBlur={() => store.seal()} />
      <ParamField field={{ ...json, label: "Settings" }} value={doc.settings} problems={[]} onChange={(v) => store.edit((d) => { const n = { ...d }; if (v === undefined) delete n.settings; else n.settings = v as Record<string, unknown>; return n; }, "flow.settings")} onBlur={() => store.seal()} />
    </div>
  );
}

/** The settings with controls of their own: offered over MCP, and the budget. The rest is in the raw settings JSON. */
function FlowSettings({ store, doc }: { store: EditorStore; doc: FlowDocument }) {
  const mcpId = useId();
  const budget = budgetOf(doc);
  return (
    <>
      <FieldRow label="MCP" help="Offer this flow as a tool to MCP clients (sluice mcp, /mcp on the server): its input schema is the tool's arguments, its description the tool's. Clients see the saved version." problems={[]} htmlFor={mcpId}>
        <label className="checkbox">
          <input id={mcpId} type="checkbox" data-setting="mcp" checked={offeredOverMCP(doc)} onChange={(e) => store.edit((d) => withMCP(d, e.target.checked))} /> Expose as an MCP tool
        </label>
      </FieldRow>
      <fieldset className="budget-settings" data-setting="budget">
        <legend>Budget</legend>
        <p className="help">Caps on what the flow’s model calls spend; a step that takes a run (or the flow’s UTC day) over one fails for good. Empty: no cap.</p>
        {BUDGET_FIELDS.map((b) => (
          <ParamField
            key={b.key}
            field={{ ...fieldOf(b.key, b.schema, false), label: b.label }}
            value={budget[b.key]}
            problems={[]}
            onChange={(v) => store.edit((d) => withBudget(d, b.key, typeof v === "number" ? v : undefined), `flow.budget.${b.key}`)}
            onBlur={() => store.seal()}
          />
        ))}
      </fieldset>
    </>
  );
}
