// The editor's document store: the flow being edited, its undo history, the selection
// and what was last saved. React reads it with useSyncExternalStore; it knows nothing of
// validation or runs (those have their own state and never call this store).
import { History } from "../flow/history";
import type { Size } from "../flow/layout";
import type { FlowDocument } from "../flow/types";

export interface EditorState {
  doc: FlowDocument;
  /** The document as last saved ("" for a flow never saved). */
  saved: string;
  selectedNodes: Set<string>;
  selectedEdges: Set<string>;
  sizes: Map<string, Size>;
  canUndo: boolean;
  canRedo: boolean;
}

export function serialize(doc: FlowDocument): string {
  return JSON.stringify(doc);
}

export class EditorStore {
  private state: EditorState;
  private readonly history = new History<FlowDocument>();
  private readonly listeners = new Set<() => void>();

  constructor(doc: FlowDocument, saved: boolean) {
    this.state = {
      doc,
      saved: saved ? serialize(doc) : "",
      selectedNodes: new Set(),
      selectedEdges: new Set(),
      sizes: new Map(),
      canUndo: false,
      canRedo: false,
    };
  }

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  };

  get = (): EditorState => this.state;

  get dirty(): boolean {
    return serialize(this.state.doc) !== this.state.saved;
  }

  private set(patch: Partial<EditorState>): void {
    this.state = { ...this.state, ...patch, canUndo: this.history.canUndo, canRedo: this.history.canRedo };
    this.listeners.forEach((f) => f());
  }

  /** Applies an edit as one undo step; edits with the same group (typing in one field) merge. */
  edit(change: (doc: FlowDocument) => FlowDocument, group?: string): void {
    const before = this.state.doc;
    const after = change(before);
    if (after === before) return;
    this.history.record(before, group);
    this.set({ doc: after, ...this.pruneSelection(after) });
  }

  /** Ends an edit group, e.g. when a field loses focus or a drag ends. */
  seal(): void {
    this.history.seal();
  }

  undo(): void {
    const prev = this.history.undo(this.state.doc);
    if (prev) this.set({ doc: prev, ...this.pruneSelection(prev) });
  }

  redo(): void {
    const next = this.history.redo(this.state.doc);
    if (next) this.set({ doc: next, ...this.pruneSelection(next) });
  }

  select(nodes: Iterable<string>, edges: Iterable<string> = []): void {
    this.set({ selectedNodes: new Set(nodes), selectedEdges: new Set(edges) });
  }

  setSelection(kind: "node" | "edge", id: string, selected: boolean): void {
    const set = new Set(kind === "node" ? this.state.selectedNodes : this.state.selectedEdges);
    if (selected) set.add(id);
    else set.delete(id);
    this.set(kind === "node" ? { selectedNodes: set } : { selectedEdges: set });
  }

  setSizes(sizes: Map<string, Size>): void {
    const next = new Map(this.state.sizes);
    sizes.forEach((v, k) => next.set(k, v));
    this.set({ sizes: next });
  }

  markSaved(doc: FlowDocument): void {
    this.set({ saved: serialize(doc) });
  }

  private pruneSelection(doc: FlowDocument): Pick<EditorState, "selectedNodes"> {
    const ids = new Set(doc.nodes.map((n) => n.id));
    return { selectedNodes: new Set([...this.state.selectedNodes].filter((id) => ids.has(id))) };
  }
}
