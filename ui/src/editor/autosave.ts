// Autosave of the working copy: every edit goes to this browser's storage at once (so a
// crashed tab loses nothing), and, for a flow the server knows, to the server as a draft
// a moment after the last edit (so a reload, another browser, or a lost laptop lose
// nothing either). A draft is never published: saving does that (editor/Editor.tsx).
import { serialize, storageKey, type StoredCopy } from "../flow/workingcopy";
import type { FlowDocument } from "../flow/types";
import type { EditorStore } from "./store";

export interface AutosaveIO {
  storage: Pick<Storage, "getItem" | "setItem" | "removeItem"> | undefined;
  saveDraft(doc: FlowDocument): Promise<unknown>;
  deleteDraft(flow: string): Promise<unknown>;
  /** Sends the draft while the page goes away (fetch with keepalive). */
  saveDraftOnExit(doc: FlowDocument): void;
}

export interface AutosaveState {
  saving: boolean;
  /** Why the last attempt failed, until one succeeds. */
  error: string | undefined;
}

export class Autosave {
  private discarded = false;
  private state: AutosaveState = { saving: false, error: undefined };
  private readonly listeners = new Set<() => void>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastDoc: FlowDocument;
  private inFlight = false;
  private key: string;
  private unsubscribe: () => void;

  /**
   * server: whether the server takes drafts of this flow (not before a new flow's first
   * save). base: what to record as the copy's base while the server holds nothing.
   */
  constructor(
    private readonly store: EditorStore,
    private readonly io: AutosaveIO,
    private server: boolean,
    private base: string,
    private readonly delayMs = 1000,
    private readonly retryMs = 5000,
  ) {
    this.lastDoc = store.get().doc;
    this.key = storageKey(this.lastDoc.id, !server);
    this.unsubscribe = store.subscribe(() => this.changed());
  }

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  };

  get = (): AutosaveState => this.state;

  private set(patch: Partial<AutosaveState>): void {
    this.state = { ...this.state, ...patch };
    this.listeners.forEach((f) => f());
  }

  /** The flow is on the server now (its first save): drafts go there from now on. */
  serverKnows(): void {
    this.io.storage?.removeItem(this.key);
    this.server = true;
    this.key = storageKey(this.store.get().doc.id, false);
    this.changed(true);
  }

  close(): void {
    clearTimeout(this.timer);
    this.unsubscribe();
  }

  /** The working copy is given up (a rollback replaced the flow): nothing more of it is
   * kept in this browser or sent to the server, not even on leaving the page. */
  discard(): void {
    this.close();
    this.discarded = true;
    this.io.storage?.removeItem(this.key);
  }

  private changed(force = false): void {
    const doc = this.store.get().doc;
    if (doc === this.lastDoc && !force) return; // a selection, a size: nothing to keep
    this.lastDoc = doc;
    this.keepLocally();
    if (!this.server) return;
    clearTimeout(this.timer);
    if (this.store.dirty) this.timer = setTimeout(() => void this.flush(), this.delayMs);
  }

  /** Writes the working copy to this browser's storage, or forgets it once the server has it. */
  private keepLocally(): void {
    const st = this.store.get();
    const doc = serialize(st.doc);
    if (this.server && !this.store.dirty) {
      this.io.storage?.removeItem(this.key);
      return;
    }
    const copy: StoredCopy = { doc, base: st.server || this.base, at: Date.now() };
    try {
      this.io.storage?.setItem(this.key, JSON.stringify(copy));
    } catch {
      /* storage full or off: the server draft still has it */
    }
  }

  /** Sends the working copy to the server now. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    if (!this.server || this.inFlight || !this.store.dirty) return;
    const st = this.store.get();
    const doc = st.doc;
    this.inFlight = true;
    this.set({ saving: true });
    try {
      if (st.published !== "" && serialize(doc) === st.published) {
        await this.io.deleteDraft(doc.id); // back to the saved file: the draft has nothing more
        if (this.store.get().server === st.server) this.store.markDraftDiscarded();
      } else {
        await this.io.saveDraft(doc);
        this.store.markSaved(doc, false);
      }
      this.set({ saving: false, error: undefined });
      this.keepLocally();
    } catch (e) {
      this.inFlight = false;
      this.set({ saving: false, error: e instanceof Error ? e.message : String(e) });
      this.timer = setTimeout(() => void this.flush(), this.retryMs);
      return;
    }
    this.inFlight = false;
    // Edited while it was being sent: send again a moment later.
    if (this.store.dirty) this.timer = setTimeout(() => void this.flush(), this.delayMs);
  }

  /** The page goes away: send what the server does not have yet. */
  exit(): void {
    if (this.server && this.store.dirty && !this.discarded) this.io.saveDraftOnExit(this.store.get().doc);
  }
}
