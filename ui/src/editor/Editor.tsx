// The flow editor: palette, canvas, inspector, problems and test run. React renders and
// routes events; the document edits, connection rules, problem mapping, layout and run
// folding are the plain modules under flow/.
import {
  Background,
  Controls,
  MiniMap,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
  type Connection as RFConnection,
  type Edge,
  type EdgeChange,
  type FinalConnectionState,
  type NodeChange,
} from "@xyflow/react";
import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import { api, ApiError } from "../api/client";
import type { ImportReport, VersionInfo } from "../api/types";
import { connectionOf, toCanvasEdges, toCanvasNodes, type CanvasNode } from "../flow/canvas";
import { checkConnection, type Connection } from "../flow/connect";
import { clipText, copy, parseClip, paste, type Clip } from "../flow/clipboard";
import { validFlowId } from "../flow/ids";
import { DEFAULT_SIZE, freeSpot, layout, nearestFreeSpot, READABLE_ZOOM, readableViewport, type Size } from "../flow/layout";
import { keyAction } from "../flow/shortcuts";
import { KeyboardHelp } from "./KeyboardHelp";
import { addNode, connect, moveNodes, removeItems } from "../flow/ops";
import { mapProblems } from "../flow/problems";
import { finished } from "../flow/runview";
import { registryOf, type ComponentSpec, type FlowDocument, type Position } from "../flow/types";
import { schedulesOf } from "../flow/schedules";
import { diffView, short, showValue, summary, type DiffView, type VersionDiff } from "../flow/versions";
import { HistoryPanel } from "./HistoryPanel";
import { SchedulesPanel } from "./SchedulesPanel";
import { decideRestore, parseStored, plural, savedMessage, saveStateText, serialize, storageKey, type RestoreDecision } from "../flow/workingcopy";
import { ApiPanel } from "./ApiPanel";
import { ChatPanel } from "./ChatPanel";
import { Autosave } from "./autosave";
import { FlowNodeView } from "./FlowNodeView";
import { NoteEditsContext, NoteView, type NoteEdits } from "./NoteView";
import { addNote, moveNotes, noteCanvasId, noteIdOf, removeNotes, toCanvasNotes, updateNote, type CanvasNote } from "../flow/notes";
import { Inspector } from "./Inspector";
import { Palette } from "./Palette";
import { ProblemsPanel } from "./ProblemsPanel";
import { initialInput, noWorkerAt, parseRunInput, RunPanel } from "./RunPanel";
import { EditorStore } from "./store";
import { TestRun } from "./testrun";
import { activePins, pinsToSend } from "../flow/pins";
import { PinStore } from "./pins";
import { PinsContext, type PinsContextValue } from "./PinsPanel";
import { useValidation } from "./useValidation";
import { TestsPanel } from "./TestsPanel";
import { testsApi } from "../api/tests";

export interface EditorData {
  /** The working copy: the flow's draft when it has one, else its saved file. */
  flow: FlowDocument;
  /** The saved file (what runs); null for a new flow or one that is only a draft. */
  published: FlowDocument | null;
  /** flow is the server's draft. */
  draft: boolean;
  components: ComponentSpec[];
  /** The flow has never been saved (a new flow). */
  isNew: boolean;
  /** The server needs a token for its API (SLUICE_TOKEN). */
  auth?: boolean;
  /** A new flow from an example: the example's test cases, kept with the first save. */
  cases?: unknown;
  /** What the viewer's role allows in this workspace, by permission ("edit", "run"), and
   * why not; absent: everything (the single-person mode). */
  can?: Record<string, boolean>;
  why?: Record<string, string>;
}

const storage = (() => {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
})();

const nodeTypes = { flow: FlowNodeView, note: NoteView };
type Tab = "inspect" | "problems" | "run" | "tests" | "history" | "schedules" | "chat" | "api";

/** What the canvas shows instead of the document being edited: a version, read-only, or
 * two versions compared. */
type View =
  | { kind: "version"; info: VersionInfo; doc: FlowDocument }
  | { kind: "compare"; from: VersionInfo; to: VersionInfo; diff: VersionDiff; dv: DiffView };
/** The last nodes copied in this browser (any tab), for the Paste button when the system clipboard cannot be read. */
const CLIP_KEY = "sluice:clipboard";

export function EditorApp({ data }: { data: EditorData }) {
  return (
    <ReactFlowProvider>
      <Editor data={data} />
    </ReactFlowProvider>
  );
}

function Editor({ data }: { data: EditorData }) {
  const canEdit = data.can?.edit ?? true;
  const canRunFlows = data.can?.run ?? true;
  const reg = useMemo(() => registryOf(data.components), [data.components]);
  const store = useMemo(
    () => new EditorStore(data.flow, data.isNew ? false : { server: data.flow, published: data.published ?? null }),
    [data.flow, data.isNew, data.published],
  );
  const st = useSyncExternalStore(store.subscribe, store.get);
  const autosave = useMemo(
    () =>
      new Autosave(store, { storage, saveDraft: (d) => api.saveDraft(d), deleteDraft: (f) => api.deleteDraft(f), saveDraftOnExit: (d) => api.saveDraftOnExit(d) }, !data.isNew && canEdit, serialize(data.flow)),
    [store, data.isNew, data.flow, canEdit],
  );
  useEffect(() => () => autosave.close(), [autosave]);
  const as = useSyncExternalStore(autosave.subscribe, autosave.get);
  const [offer, setOffer] = useState<Extract<RestoreDecision, { kind: "offer" }> | undefined>();
  const testRun = useMemo(() => new TestRun(data.flow.id), [data.flow.id]);
  const rs = useSyncExternalStore(testRun.subscribe, testRun.get);
  // Pinned node outputs for test runs: this browser's, per flow, never in the document.
  const pinStore = useMemo(() => new PinStore(data.flow.id, storage), [data.flow.id]);
  const pins = useSyncExternalStore(pinStore.subscribe, pinStore.get);
  useEffect(() => {
    const onStorage = (e: StorageEvent) => pinStore.storageChanged(e.key);
    window.addEventListener("storage", onStorage);
    return () => window.removeEventListener("storage", onStorage);
  }, [pinStore]);
  const [isNew, setIsNew] = useState(data.isNew);
  const [tab, setTab] = useState<Tab>("inspect");
  // The nodes whose output changed in the test case the Tests tab shows.
  const [testMarks, setTestMarks] = useState<Set<string>>(() => new Set());
  // The Test run tab's input, kept here so that it outlives the tab and Ctrl+Enter can run with it.
  const [runInput, setRunInput] = useState(() => initialInput(data.flow));
  const [runInputTyped, setRunInputTyped] = useState(false);
  const [toast, setToast] = useState<{ text: string; kind: "ok" | "warn" | "error" } | undefined>();
  const [saving, setSaving] = useState(false);
  const [note, setNote] = useState("");
  const [savedAt, setSavedAt] = useState(0);
  const [view, setView] = useState<View | undefined>();
  const [viewSel, setViewSel] = useState<Set<string>>(new Set());
  const [imported, setImported] = useState<ImportReport | undefined>(() => {
    const raw = sessionStorage.getItem(`sluice-import:${data.flow.id}`);
    return raw ? (JSON.parse(raw) as ImportReport) : undefined;
  });
  const rf = useReactFlow();
  const canvasRef = useRef<HTMLDivElement>(null);
  const { doc } = st;
  const dirty = isNew || store.dirty;
  const hasDraft = !isNew && store.draft;

  const validation = useValidation(doc);
  useEffect(() => pinStore.setFlow(doc.id), [pinStore, doc.id]);
  const pinned = useMemo(() => activePins(pins, doc), [pins, doc]);
  const pinsCtx = useMemo<PinsContextValue>(() => ({ store: pinStore, pins, doc, select: (node) => store.select([node]) }), [pinStore, pins, doc, store]);
  const pmap = useMemo(() => mapProblems(validation.problems, doc), [validation.problems, doc]);
  const inputParams = JSON.stringify(doc.nodes.find((n) => n.type === "input")?.params ?? null);
  useEffect(() => {
    if (!runInputTyped) setRunInput(initialInput(store.get().doc));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [inputParams]);

  useEffect(() => {
    if (!isNew) testRun.watch(doc.id);
    return () => testRun.close();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [isNew, testRun]);

  // /flows/ID?run=RUN (the run page's "Open on the canvas"): that run, followed live.
  useEffect(() => {
    const run = new URLSearchParams(location.search).get("run");
    if (!run || data.isNew) return;
    setTab("run");
    void testRun.open(run, store.get().doc);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [testRun]);

  const openRun = useCallback((run: string) => void testRun.open(run, store.get().doc), [testRun, store]);

  // The URL names the run the canvas shows (?run=RUN), whichever way it came: a reload
  // shows that run, not the one the page was first opened on.
  const shownRun = rs.view?.run;
  useEffect(() => {
    if (!shownRun || isNew) return;
    const url = new URL(location.href);
    if (url.searchParams.get("run") === shownRun) return;
    url.searchParams.set("run", shownRun);
    history.replaceState(history.state, "", url);
  }, [shownRun, isNew]);

  const say = useCallback((text: string, kind: "ok" | "warn" | "error" = "ok") => setToast({ text, kind }), []);

  // Edits this browser kept and the server never got (a crashed tab, a lost connection).
  useEffect(() => {
    const d = decideRestore(serialize(data.flow), parseStored(storage?.getItem(storageKey(data.flow.id, data.isNew)) ?? null));
    if (d.kind === "restore") {
      store.replace(d.doc);
      say("Restored the changes this browser had kept but the server never got");
    } else if (d.kind === "offer") setOffer(d);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [store]);

  // The page goes away: send what the server does not have yet.
  useEffect(() => {
    const onHide = () => autosave.exit();
    window.addEventListener("pagehide", onHide);
    return () => window.removeEventListener("pagehide", onHide);
  }, [autosave]);
  useEffect(() => {
    if (!toast) return;
    const t = setTimeout(() => setToast(undefined), toast.kind === "error" ? 8000 : 3000);
    return () => clearTimeout(t);
  }, [toast]);

  const editNodes = useMemo<(CanvasNode | CanvasNote)[]>(
    () => [...toCanvasNotes(doc, st.selectedNodes), ...toCanvasNodes(doc, reg, { problems: pmap, run: rs.view?.nodes, queues: rs.queues, selectedNodes: st.selectedNodes, sizes: st.sizes, pins: pinned, changed: testMarks })],
    [doc, reg, pmap, rs.view, rs.queues, st.selectedNodes, st.sizes, pinned, testMarks],
  );
  const noteEdits = useMemo<NoteEdits>(
    () => ({
      text: (id, text) => store.edit((d) => updateNote(d, id, { text }), `note:${id}.text`),
      resize: (id, box, done) => {
        store.edit((d) => updateNote(d, id, { position: { x: box.x, y: box.y }, width: box.width, height: box.height }), `note:${id}.size`);
        if (done) store.seal();
      },
      seal: () => store.seal(),
    }),
    [store],
  );
  const editEdges = useMemo(() => toCanvasEdges(doc, { problems: pmap, run: rs.view?.nodes, selectedEdges: st.selectedEdges }), [doc, pmap, rs.view, st.selectedEdges]);
  // A version open or two compared: drawn read-only in place of the document.
  const viewDoc = view?.kind === "version" ? view.doc : view?.dv.doc;
  const viewMarks = useMemo(() => (view?.kind === "compare" ? { nodes: view.dv.nodes, edges: view.dv.edges } : undefined), [view]);
  const viewNodes = useMemo(() => (viewDoc ? toCanvasNodes(viewDoc, reg, { selectedNodes: viewSel, marks: viewMarks }) : []), [viewDoc, reg, viewSel, viewMarks]);
  const viewEdges = useMemo(() => (viewDoc ? toCanvasEdges(viewDoc, { marks: viewMarks }) : []), [viewDoc, viewMarks]);
  const nodes: (CanvasNode | CanvasNote)[] = view ? viewNodes : editNodes;
  const edges = view ? viewEdges : editEdges;

  const onNodesChange = useCallback(
    (changes: NodeChange<CanvasNode | CanvasNote>[]) => {
      if (view) {
        // Read-only: only selection, to show a node's changes.
        let sel: Set<string> | undefined;
        for (const c of changes) {
          if (c.type !== "select") continue;
          sel ??= new Set(viewSel);
          if (c.selected) sel.add(c.id);
          else sel.delete(c.id);
        }
        if (sel) setViewSel(sel);
        return;
      }
      const moves = new Map<string, Position>();
      const noteMoves = new Map<string, Position>();
      let dragEnded = false;
      const sizes = new Map<string, Size>();
      let sel: Set<string> | undefined;
      for (const c of changes) {
        if (c.type === "position" && c.position && noteIdOf(c.id) !== undefined) {
          noteMoves.set(noteIdOf(c.id)!, c.position);
          if (c.dragging === false) dragEnded = true;
        } else if (c.type === "position" && c.position) {
          moves.set(c.id, c.position);
          if (c.dragging === false) dragEnded = true;
        } else if (c.type === "position" && c.dragging === false) {
          dragEnded = true;
        } else if (c.type === "dimensions" && c.dimensions) {
          sizes.set(c.id, c.dimensions);
        } else if (c.type === "select") {
          sel ??= new Set(store.get().selectedNodes);
          if (c.selected) sel.add(c.id);
          else sel.delete(c.id);
        }
      }
      if (moves.size || noteMoves.size) store.edit((d) => moveNotes(moveNodes(d, moves), noteMoves), "drag");
      if (dragEnded) store.seal();
      if (sizes.size) store.setSizes(sizes);
      if (sel) store.select(sel, store.get().selectedEdges);
    },
    [store, view, viewSel],
  );

  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => {
      if (view) return;
      let sel: Set<string> | undefined;
      for (const c of changes) {
        if (c.type === "select") {
          sel ??= new Set(store.get().selectedEdges);
          if (c.selected) sel.add(c.id);
          else sel.delete(c.id);
        }
      }
      if (sel) store.select(store.get().selectedNodes, sel);
    },
    [store, view],
  );

  const verdict = useCallback((c: Connection) => checkConnection(store.get().doc, reg, c), [store, reg]);
  const isValidConnection = useCallback((c: Edge | RFConnection) => verdict(connectionOf(c as RFConnection)).ok, [verdict]);
  const onConnect = useCallback(
    (c: RFConnection) => {
      const conn = connectionOf(c);
      const v = verdict(conn);
      if (!v.ok) return say(`Not connected: ${v.reason}`, "error");
      store.edit((d) => connect(d, conn));
    },
    [store, verdict, say],
  );
  const onConnectEnd = useCallback(
    (_: MouseEvent | TouchEvent, s: FinalConnectionState) => {
      if (s.isValid || !s.fromHandle || !s.toHandle) return;
      const [src, dst] = s.fromHandle.type === "source" ? [s.fromHandle, s.toHandle] : [s.toHandle, s.fromHandle];
      const v = verdict({ from: src.nodeId, port: src.id ?? "out", to: dst.nodeId, to_port: dst.id ?? "in" });
      if (!v.ok) say(`Not connected: ${v.reason}`, "error");
    },
    [verdict, say],
  );

  const onDelete = useCallback(
    ({ nodes: ns, edges: es }: { nodes: (CanvasNode | CanvasNote)[]; edges: Edge[] }) => {
      const notes = new Set(ns.map((n) => noteIdOf(n.id)).filter((x): x is string => x !== undefined));
      store.edit((d) => removeNotes(removeItems(d, new Set(ns.map((n) => n.id)), new Set(es.map((e) => e.id))), notes));
    },
    [store],
  );

  /** A sticky note in the middle of the view. */
  const addNoteHere = useCallback(() => {
    const r = canvasRef.current?.getBoundingClientRect();
    const p = rf.screenToFlowPosition(r ? { x: r.left + r.width / 2, y: r.top + r.height / 3 } : { x: 400, y: 200 });
    let id = "";
    store.edit((d) => {
      const x = addNote(d, { x: p.x - 110, y: p.y - 60 });
      id = x.id;
      return x.doc;
    });
    store.seal();
    store.select([`note:${id}`]);
    setTimeout(() => document.querySelector<HTMLTextAreaElement>(`[data-note="${id}"] textarea`)?.focus(), 0);
  }, [rf, store]);

  const add = useCallback(
    (type: string, at?: { x: number; y: number }) => {
      let pos: Position;
      if (at) {
        const p = rf.screenToFlowPosition(at);
        pos = nearestFreeSpot(store.get().doc, (id) => store.get().sizes.get(id), { x: p.x - 100, y: p.y - 30 });
      } else {
        const r = canvasRef.current?.getBoundingClientRect();
        const p = rf.screenToFlowPosition(r ? { x: r.left + r.width / 2, y: r.top + r.height / 2 } : { x: 400, y: 300 });
        pos = freeSpot(store.get().doc, (id) => store.get().sizes.get(id), { x: p.x - 100, y: p.y - 30 });
      }
      const spec = reg.get(type);
      let id = "";
      store.edit((d) => {
        const r = addNode(d, type, pos);
        id = r.id;
        return r.doc;
      });
      store.select([id]);
      setTab("inspect");
      say(`Added ${spec?.title ?? type} “${id}”`);
    },
    [rf, store, reg, say],
  );

  /**
   * Saves the working copy: a valid flow is written and published (it runs from then on);
   * one with errors is kept as a draft. Resolves to whether it was published.
   */
  const save = useCallback(async (): Promise<boolean> => {
    const d = store.get().doc;
    if (!canEdit) {
      say(`Not saved: ${data.why?.edit ?? "your role may not change flows"}`, "error");
      return false;
    }
    if (!validFlowId(d.id)) {
      say(`Not saved: the flow id "${d.id}" is not valid (lower-case letters, digits, - and _)`, "error");
      setTab("inspect");
      store.select([]);
      return false;
    }
    setSaving(true);
    try {
      let valid = true;
      let errors = 0;
      try {
        const v = await api.validate(d);
        valid = v.valid;
        errors = v.problems.filter((p) => p.severity === "error").length;
      } catch {
        /* the save itself will say what is wrong */
      }
      const message = note.trim() || undefined;
      const attempt = (create: boolean) => (valid ? api.save(d, create, message) : api.saveDraft(d, create));
      try {
        await attempt(isNew);
      } catch (e) {
        if (!(isNew && e instanceof ApiError && e.status === 409)) throw e;
        if (!confirm(`A flow "${d.id}" exists already. Replace it?`)) return false;
        await attempt(false);
      }
      store.markSaved(d, valid);
      if (valid) {
        setNote("");
        setSavedAt(Date.now());
      }
      if (isNew) {
        setIsNew(false);
        history.replaceState(null, "", `/flows/${encodeURIComponent(d.id)}`);
        autosave.serverKnows();
        if (data.cases) await testsApi.saveCases(d.id, { ...(data.cases as object), flow: d.id }).catch((e) => say(`The example’s test cases were not kept: ${e instanceof Error ? e.message : String(e)}`, "warn"));
      }
      document.title = `${d.name || d.id} · Sluice`;
      say(savedMessage(valid, errors, store.get().published !== ""), valid ? "ok" : "warn");
      if (!valid) setTab("problems");
      return valid;
    } catch (e) {
      const msg = e instanceof ApiError ? e.message : String(e);
      say(`Not saved: ${msg}`, "error");
      if (e instanceof ApiError && e.problems.length) setTab("problems");
      return false;
    } finally {
      setSaving(false);
    }
  }, [store, isNew, say, autosave, note, data.cases]);

  const openVersion = useCallback(
    async (v: VersionInfo) => {
      try {
        const detail = await api.version(doc.id, v.version);
        setViewSel(new Set());
        setView({ kind: "version", info: v, doc: detail.document as FlowDocument });
        setTimeout(() => void rf.fitView({ padding: 0.2, duration: 200 }), 50);
      } catch (e) {
        say(`Cannot open version ${short(v.version)}: ${e instanceof Error ? e.message : String(e)}`, "error");
      }
    },
    [doc.id, rf, say],
  );

  const compare = useCallback(
    async (from: VersionInfo, to: VersionInfo) => {
      try {
        const [a, b, d] = await Promise.all([api.version(doc.id, from.version), api.version(doc.id, to.version), api.versionDiff(doc.id, from.version, to.version)]);
        setViewSel(new Set());
        setView({ kind: "compare", from, to, diff: d, dv: diffView(a.document as FlowDocument, b.document as FlowDocument, d) });
        setTab("history");
        setTimeout(() => void rf.fitView({ padding: 0.2, duration: 200 }), 50);
      } catch (e) {
        say(`Cannot compare: ${e instanceof Error ? e.message : String(e)}`, "error");
      }
    },
    [doc.id, rf, say],
  );

  const rollback = useCallback(
    async (v: VersionInfo) => {
      const ask = `Roll back to version ${short(v.version)}${v.message ? ` (“${v.message}”)` : ""}? It becomes current: new runs start on it and the flow's file is rewritten with it. Runs in flight keep their version.`;
      if (!confirm(ask)) return;
      if ((isNew || store.dirty) && !confirm("Your unsaved changes will be lost. Roll back anyway?")) return;
      try {
        await api.rollback(doc.id, v.version);
        autosave.discard(); // the server dropped the draft: the rolled-back version is the flow now
        window.removeEventListener("beforeunload", leaveGuard.current);
        location.reload();
      } catch (e) {
        say(`Not rolled back: ${e instanceof Error ? e.message : String(e)}`, "error");
      }
    },
    [doc.id, isNew, store, say, autosave],
  );

  /** Saves if needed, then starts a run and follows it on the canvas; resolves to its id. */
  const run = useCallback(
    async (input: unknown, from: Tab = "run"): Promise<string | undefined> => {
      setTab(from);
      if (isNew || store.dirty || store.draft) {
        if (!(await save())) return undefined;
        setTab(from);
      }
      const d = store.get().doc;
      return testRun.start(d, input, pinsToSend(pinStore.get(), d).pins);
    },
    [isNew, store, save, testRun, pinStore],
  );

  const discardDraft = useCallback(async () => {
    const published = store.get().published;
    if (!published || !confirm("Discard the draft and go back to the saved flow?")) return;
    try {
      await api.deleteDraft(store.get().doc.id);
      store.markDraftDiscarded();
      store.replace(JSON.parse(published) as FlowDocument);
      say("Back to the saved flow");
    } catch (e) {
      say(`Draft not discarded: ${e instanceof ApiError ? e.message : String(e)}`, "error");
    }
  }, [store, say]);

  /** Shows the flow at a zoom where its text reads well: all of it if it fits, else from its start. */
  const showReadable = useCallback(
    (duration = 200, minZoom = READABLE_ZOOM) => {
      const r = canvasRef.current?.getBoundingClientRect();
      const d = store.get().doc;
      if (!r || d.nodes.length === 0) return;
      const nodes = d.nodes.map((n) => ({ position: n.position ?? { x: 0, y: 0 }, size: store.get().sizes.get(n.id) ?? DEFAULT_SIZE }));
      void rf.setViewport(readableViewport(nodes, { width: r.width, height: r.height }, { minZoom }), { duration });
    },
    [store, rf],
  );

  const autoLayout = useCallback(() => {
    store.edit((d) => moveNodes(d, layout(d, (id) => store.get().sizes.get(id))));
    store.seal();
    setTimeout(() => showReadable(), 0);
  }, [store, showReadable]);

  const [help, setHelp] = useState(false);

  /** Copies the selected nodes: to the system clipboard (other flows, tabs, browsers) and this browser's storage. */
  const doCopy = useCallback(
    (data?: DataTransfer | null) => {
      const c = copy(store.get().doc, store.get().selectedNodes);
      if (!c) return false;
      const text = clipText(c);
      if (data) data.setData("text/plain", text);
      else void navigator.clipboard?.writeText(text).catch(() => undefined);
      try {
        storage?.setItem(CLIP_KEY, text);
      } catch {
        /* storage off: the system clipboard has it */
      }
      say(`Copied ${c.nodes.length} ${c.nodes.length === 1 ? "node" : "nodes"}`);
      return true;
    },
    [store, say],
  );

  const pasteClip = useCallback(
    (clip: Clip) => {
      let ids: string[] = [];
      store.edit((d) => {
        const r = paste(d, clip);
        ids = r.ids;
        return r.doc;
      });
      store.select(ids);
      say(`Pasted ${ids.length} ${ids.length === 1 ? "node" : "nodes"}: ${ids.join(", ")}`);
    },
    [store, say],
  );

  /** Pastes what the clipboard holds (text from a paste event, or read from the clipboard). */
  const doPaste = useCallback(
    async (text?: string) => {
      if (text === undefined) {
        text = await navigator.clipboard?.readText().catch(() => undefined);
        if (!text) text = storage?.getItem(CLIP_KEY) ?? "";
      }
      const clip = parseClip(text);
      if (clip) return pasteClip(clip);
      say(text.trim() ? "The clipboard holds no nodes to paste: select nodes in a flow and copy them (Ctrl+C) first" : "The clipboard is empty: select nodes in a flow and copy them (Ctrl+C) first", "error");
    },
    [pasteClip, say],
  );

  // Copy and paste through the system clipboard: the browser's copy and paste events
  // (Ctrl/Cmd+C and V), unless a text field has the focus.
  useEffect(() => {
    const typing = (t: EventTarget | null) => {
      const el = t as HTMLElement | null;
      return !!el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
    };
    const onCopy = (e: ClipboardEvent) => {
      if (typing(e.target) || (window.getSelection()?.toString() ?? "") !== "") return;
      if (doCopy(e.clipboardData)) e.preventDefault();
    };
    const onPaste = (e: ClipboardEvent) => {
      if (typing(e.target)) return;
      e.preventDefault();
      let text = e.clipboardData?.getData("text/plain") ?? "";
      if (!text) text = storage?.getItem(CLIP_KEY) ?? "";
      void doPaste(text);
    };
    document.addEventListener("copy", onCopy);
    document.addEventListener("paste", onPaste);
    return () => {
      document.removeEventListener("copy", onCopy);
      document.removeEventListener("paste", onPaste);
    };
  }, [doCopy, doPaste]);

  const deleteSelected = useCallback(() => {
    const { selectedNodes, selectedEdges } = store.get();
    if (selectedNodes.size + selectedEdges.size === 0) return;
    const notes = new Set([...selectedNodes].map(noteIdOf).filter((x): x is string => x !== undefined));
    store.edit((d) => removeNotes(removeItems(d, selectedNodes, selectedEdges), notes));
  }, [store]);

  /** Ctrl/Cmd+Enter: a test run with the Test run tab's input, or why there is none. */
  const runFromKeyboard = useCallback(() => {
    setTab("run");
    const parsed = parseRunInput(runInput);
    const v = testRun.get().view;
    if (parsed.error !== undefined) say(`Not run: the input is not JSON: ${parsed.error}`, "error");
    else if (pmap.errors > 0 || store.get().doc.nodes.length === 0) say(pmap.errors > 0 ? `Not run: fix the flow's ${plural(pmap.errors, "error")} first (see Problems)` : "Not run: the flow has no nodes yet", "error");
    else if (testRun.get().starting || (v && !finished(v.status))) say("Not run: a run is under way (cancel it in the Test run tab)", "error");
    else void run(parsed.input);
  }, [runInput, pmap.errors, store, testRun, say, run]);

  // Keyboard: the keys of flow/shortcuts.ts; copy and paste come as clipboard events
  // (above); the canvas handles Delete itself. A key a field handled (Enter in the chat)
  // is not the editor's.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented) return;
      const t = e.target as HTMLElement | null;
      const typing = !!t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
      const action = keyAction(e, typing);
      if (!action) return;
      if (view && action !== "help" && action !== "escape" && action !== "fit") return; // a version shown read-only
      e.preventDefault();
      switch (action) {
        case "save":
          void save();
          break;
        case "run":
          runFromKeyboard();
          break;
        case "undo":
          store.undo();
          break;
        case "redo":
          store.redo();
          break;
        case "selectAll": {
          const d = store.get().doc;
          store.select([...d.nodes.map((n) => n.id), ...(d.notes ?? []).map((n) => noteCanvasId(n.id))]);
          break;
        }
        case "escape":
          if (help) setHelp(false);
          else store.select([]);
          break;
        case "help":
          setHelp(true);
          break;
        case "note":
          addNoteHere();
          break;
        case "layout":
          autoLayout();
          break;
        case "fit":
          void rf.fitView({ padding: 0.2, duration: 200 });
          break;
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [save, store, addNoteHere, autoLayout, rf, view, help, runFromKeyboard]);

  // Unsaved changes: the browser asks before leaving the page. A new flow nobody has
  // edited yet (blank, or an example as it is) loses nothing.
  const guard = isNew ? st.canUndo : store.dirty;
  const leaveGuard = useRef((e: BeforeUnloadEvent) => {
    e.preventDefault();
    e.returnValue = "";
  });
  useEffect(() => {
    if (!guard) return;
    const onLeave = leaveGuard.current;
    window.addEventListener("beforeunload", onLeave);
    return () => window.removeEventListener("beforeunload", onLeave);
  }, [guard]);

  const showProblemTarget = useCallback(
    (t: { node?: string; edge?: string }) => {
      if (t.node) {
        store.select([t.node]);
        const n = rf.getNode(t.node);
        if (n) void rf.fitView({ nodes: [n], maxZoom: 1.2, duration: 200 });
      } else if (t.edge) store.select([], [t.edge]);
      setTab("inspect");
    },
    [store, rf],
  );

  const selectedNode = st.selectedNodes.size === 1 ? [...st.selectedNodes][0] : undefined;
  const running = !!rs.view && !finished(rs.view.status);
  const noWorker = !!rs.view && noWorkerAt(rs.view).length > 0;
  const problemCount = validation.problems.length;

  return (
    <div className="editor">
      <div className="editor-toolbar" role="toolbar" aria-label="Editor">
        <span className="flow-title" title={doc.id}>
          {doc.name || doc.id}
        </span>
        <span className={`save-state${dirty ? " unsaved" : ""}${hasDraft && !dirty ? " draft" : ""}${as.error && dirty ? " failed" : ""}`} id="save-state" role="status">
          {saveStateText({ isNew, saving, dirty, draft: hasDraft, autosaveError: as.error })}
        </span>
        <button type="button" className="primary" id="save-button" onClick={() => void save()} disabled={saving || !canEdit} title={canEdit ? "Save (Ctrl+S): a valid flow is published and runs; one with errors is kept as a draft" : data.why?.edit}>
          Save
        </button>
        {hasDraft && store.get().published !== "" && (
          <button type="button" id="discard-draft" onClick={() => void discardDraft()} title="Go back to the saved flow">
            Discard draft
          </button>
        )}
        <span className="sep" />
        <button type="button" onClick={() => store.undo()} disabled={!st.canUndo || !!view} title="Undo (Ctrl+Z)">
          Undo
        </button>
        <button type="button" onClick={() => store.redo()} disabled={!st.canRedo || !!view} title="Redo (Ctrl+Shift+Z)">
          Redo
        </button>
        <button type="button" onClick={() => doCopy(null)} disabled={st.selectedNodes.size === 0 || !!view} title="Copy (Ctrl+C)">
          Copy
        </button>
        <button type="button" onClick={() => void doPaste()} disabled={!!view} title="Paste (Ctrl+V)">
          Paste
        </button>
        <button type="button" onClick={deleteSelected} disabled={st.selectedNodes.size + st.selectedEdges.size === 0 || !!view} title="Delete (Delete key)">
          Delete
        </button>
        <span className="sep" />
        <button type="button" onClick={addNoteHere} disabled={!!view} id="add-note" title="Add a sticky note (N): it never changes the flow's version">
          Note
        </button>
        <button type="button" onClick={autoLayout} disabled={doc.nodes.length === 0 || !!view} title="Lay the flow out left to right, keeping the text readable (L)">
          Auto-layout
        </button>
        <button type="button" onClick={() => void rf.fitView({ padding: 0.2, duration: 200 })} title="Fit the whole flow in view (F)">
          Fit view
        </button>
        <button type="button" className="icon-button" onClick={() => setHelp(true)} id="help-button" title="Keyboard shortcuts (?)" aria-label="Keyboard shortcuts">
          ?
        </button>
        <span className="grow" />
        <button type="button" className={`problems-count${pmap.errors ? " has-errors" : ""}`} onClick={() => setTab("problems")} id="problems-count">
          {validation.checking && problemCount === 0 ? "Checking…" : problemCount === 0 ? "Valid" : `${plural(pmap.errors, "error")} · ${plural(pmap.warnings, "warning")}`}
        </button>
        {!isNew && (
          <>
            <a className="button" href={`/runs?flow=${encodeURIComponent(doc.id)}`}>
              Runs
            </a>
            <a className="button" href={`/queues?flow=${encodeURIComponent(doc.id)}`}>
              Queues
            </a>
            <a className="button" href={`/api/flows/${encodeURIComponent(doc.id)}/export`} download={`${doc.id}.json`}>
              Export
            </a>
          </>
        )}
      </div>
      <div className="editor-body">
        <Palette specs={data.components} onAdd={add} />
        <div className="canvas" ref={canvasRef}>
          <NoteEditsContext.Provider value={noteEdits}>
          <ReactFlow<CanvasNode | CanvasNote>
            nodes={nodes}
            edges={edges}
            nodeTypes={nodeTypes}
            onNodesChange={onNodesChange}
            onEdgesChange={onEdgesChange}
            onConnect={onConnect}
            onConnectEnd={onConnectEnd}
            isValidConnection={isValidConnection}
            nodesDraggable={!view}
            nodesConnectable={!view}
            onDelete={onDelete}
            onNodeClick={() => setTab((t) => (t === "problems" ? "inspect" : t))}
            onEdgeClick={() => setTab((t) => (t === "problems" ? "inspect" : t))}
            deleteKeyCode={view ? null : ["Delete", "Backspace"]}
            onInit={() => showReadable(0, 0.5)}
            minZoom={0.2}
            proOptions={{ hideAttribution: true }}
          >
            <Background gap={16} />
            <Controls showInteractive={false} />
            <MiniMap pannable zoomable style={{ width: 160, height: 110 }} nodeClassName={(n) => (n.type === "note" ? "minimap-note" : `minimap-node status-${(n as CanvasNode).data.run?.status ?? "none"}`)} />
          </ReactFlow>
          </NoteEditsContext.Provider>
          {doc.nodes.length === 0 && (
            <div className="canvas-empty">
              <p>
                <strong>Start here:</strong> drag an <em>Input</em> from the palette, then the steps, then an <em>Output</em>.
              </p>
              <p className="muted">Connect them by dragging from a port on the right of a node to a port on the left of the next.</p>
            </div>
          )}
          {offer && (
            <div className="canvas-banner" role="alert" id="restore-offer">
              This browser kept changes to this flow from {new Date(offer.at).toLocaleString()}, made on an older version of it.
              <button
                type="button"
                onClick={() => {
                  store.replace(offer.doc);
                  setOffer(undefined);
                }}
              >
                Restore them
              </button>
              <button
                type="button"
                onClick={() => {
                  storage?.removeItem(storageKey(data.flow.id, data.isNew));
                  setOffer(undefined);
                }}
              >
                Discard
              </button>
            </div>
          )}
          {running && !view && (
            <div className={`canvas-running status-${rs.view!.status}${noWorker ? " no-worker" : ""}`}>
              {noWorker ? "Queued — no worker serves this flow’s version" : rs.view!.status === "waiting" ? "Waiting for a decision…" : rs.view!.status === "queued" ? "Queued…" : "Running…"}
            </div>
          )}
          {view && (
            <div className="canvas-banner" role="status" id="view-banner">
              {view.kind === "version" ? (
                <span>
                  Version <code>{short(view.info.version)}</code>
                  {view.info.current ? " (current)" : ""}, read-only{view.info.message ? ` — “${view.info.message}”` : ""}
                </span>
              ) : (
                <span>
                  <code>{short(view.from.version)}</code> → <code>{short(view.to.version)}</code>: {summary(view.diff)}
                  <span className="legend">
                    <span className="mark-added">added</span> <span className="mark-removed">removed</span> <span className="mark-changed">changed</span>
                  </span>
                </span>
              )}
              {view.kind === "version" && !view.info.current && (
                <button type="button" className="danger" onClick={() => void rollback(view.info)}>
                  Roll back to this
                </button>
              )}
              <button type="button" className="primary" id="back-to-editing" onClick={() => setView(undefined)}>
                Back to editing
              </button>
            </div>
          )}
          {imported && !view && (
            <div className="canvas-banner import-report" role="status" id="import-report">
              <details open={imported.gaps.length > 0}>
                <summary>
                  Imported from Langflow{imported.gaps.length ? `: ${imported.gaps.length} placeholder${imported.gaps.length === 1 ? "" : "s"} to replace` : ""}
                  {imported.notes.length ? `, ${imported.notes.length} note${imported.notes.length === 1 ? "" : "s"}` : ""}
                </summary>
                <ul>
                  {imported.gaps.map((g) => (
                    <li key={g.node} className="error">
                      {g.placeholder ? <code>{g.placeholder}</code> : g.node} ({g.type}): {g.why}
                    </li>
                  ))}
                  {imported.notes.map((n, i) => (
                    <li key={i}>
                      {n.node} ({n.type}): {n.message}
                    </li>
                  ))}
                </ul>
              </details>
              <button
                type="button"
                className="icon"
                aria-label="Dismiss"
                onClick={() => {
                  sessionStorage.removeItem(`sluice-import:${doc.id}`);
                  setImported(undefined);
                }}
              >
                ×
              </button>
            </div>
          )}
        </div>
        <aside className="side-panel" aria-label="Details">
          <div className="tabs" role="tablist">
            <button type="button" role="tab" aria-selected={tab === "inspect"} onClick={() => setTab("inspect")} id="inspect-tab">
              Inspect
            </button>
            <button type="button" role="tab" aria-selected={tab === "problems"} onClick={() => setTab("problems")} id="problems-tab">
              Problems{problemCount > 0 && <span className={`badge ${pmap.errors ? "badge-error" : "badge-warning"}`}>{problemCount}</span>}
            </button>
            <button type="button" role="tab" aria-selected={tab === "run"} onClick={() => setTab("run")} id="run-tab">
              Test run{rs.view && <span className={`badge status-${rs.view.status}`}>{rs.view.status}</span>}
            </button>
            <button type="button" role="tab" aria-selected={tab === "tests"} onClick={() => setTab("tests")} id="tests-tab" title="Test cases: run them on the working copy before saving">
              Tests{testMarks.size > 0 && <span className="badge badge-warning">{testMarks.size}</span>}
            </button>
            <button type="button" role="tab" aria-selected={tab === "history"} onClick={() => setTab("history")} id="history-tab">
              History
            </button>
            <button type="button" role="tab" aria-selected={tab === "schedules"} onClick={() => setTab("schedules")} id="schedules-tab">
              Schedules{schedulesOf(doc).length > 0 && <span className="badge">{schedulesOf(doc).length}</span>}

            </button>
            <button type="button" role="tab" aria-selected={tab === "chat"} onClick={() => setTab("chat")} id="chat-tab" title="Talk to a flow that takes a conversation">
              Chat
            </button>
            <button type="button" role="tab" aria-selected={tab === "api"} onClick={() => setTab("api")} id="api-tab" title="Run this flow from your code">
              API
            </button>
          </div>
          <PinsContext.Provider value={pinsCtx}>
          <div className="tab-body" role="tabpanel">
            {tab === "inspect" && view && (
              <p className="muted">
                The canvas shows {view.kind === "version" ? "a saved version, read-only" : "two versions compared"}; the flow you edit is kept as it was.{" "}
                <button type="button" className="link" onClick={() => setView(undefined)}>
                  Back to editing
                </button>
              </p>
            )}
            {tab === "inspect" && !view && <Inspector store={store} doc={doc} reg={reg} problems={pmap} selectedNodes={st.selectedNodes} selectedEdges={st.selectedEdges} isNew={isNew} />}
            {tab === "problems" && <ProblemsPanel problems={validation.problems} map={pmap} checking={validation.checking} error={validation.error} onShow={showProblemTarget} />}
            {tab === "chat" && <ChatPanel doc={doc} state={rs} canRun={pmap.errors === 0 && doc.nodes.length > 0} onSend={(input) => run(input, "chat")} onOpen={openRun} />}
            {tab === "api" && <ApiPanel doc={doc} auth={!!data.auth} isNew={isNew} onCopied={(what) => say(`Copied: ${what}`)} />}
            {tab === "run" && (
              <RunPanel
                doc={doc}
                state={rs}
                selectedNode={selectedNode}
                canRun={pmap.errors === 0 && doc.nodes.length > 0 && canRunFlows && (canEdit || !(dirty || hasDraft))}
                blocked={!canRunFlows ? data.why?.run : pmap.errors > 0 ? `This flow cannot run: fix its ${plural(pmap.errors, "error")} (see Problems). Your changes are kept as a draft; ${st.published ? "runs started elsewhere use the last saved version" : "it has never been saved valid, so nothing runs it yet"}.` : undefined}
                runLabel={dirty || hasDraft ? "Save and run" : "Run"}
                input={runInput}
                onInput={(text) => {
                  setRunInput(text);
                  setRunInputTyped(true);
                }}
                onRun={(input) => void run(input)}
                onCancel={() => void testRun.cancel()}
                onResume={(node, d) => void testRun.resume(node, d)}
                onSelect={(node) => store.select([node])}
                onOpen={openRun}
                published={st.published}
              />
            )}
            {tab === "history" && (
              <>
                {view?.kind === "compare" && <Changes view={view} selected={viewSel} onShow={(id) => { setViewSel(new Set([id])); const n = rf.getNode(id); if (n) void rf.fitView({ nodes: [n], maxZoom: 1.2, duration: 200 }); }} />}
                <HistoryPanel
                  flow={doc.id}
                  isNew={isNew}
                  savedAt={savedAt}
                  note={note}
                  onNote={setNote}
                  open={view?.kind === "version" ? view.info.version : undefined}
                  onOpen={(v) => void openVersion(v)}
                  onCompare={(a, b) => void compare(a, b)}
                  onRollback={(v) => void rollback(v)}
                  canPromote={canEdit}
                />
              </>
            )}
            {tab === "tests" && (
              <TestsPanel
                doc={doc}
                isNew={isNew}
                lastRun={rs.view && finished(rs.view.status) ? rs.view.run : undefined}
                canRun={pmap.errors === 0 && doc.nodes.length > 0}
                onMark={setTestMarks}
                say={say}
              />
            )}
            {tab === "schedules" && <SchedulesPanel store={store} doc={doc} isNew={isNew} savedAt={savedAt} problems={validation.problems} say={say} />}
          </div>
          </PinsContext.Provider>
        </aside>
      </div>
      {help && <KeyboardHelp onClose={() => setHelp(false)} />}
      {toast && (
        <div className={`toast toast-${toast.kind}`} role={toast.kind === "error" ? "alert" : "status"} id="toast">
          {toast.text}
          <button type="button" className="icon" aria-label="Dismiss" onClick={() => setToast(undefined)}>
            ×
          </button>
        </div>
      )}
    </div>
  );
}

/** The changes between two versions, grouped; choosing a node shows it on the canvas. */
function Changes({ view, selected, onShow }: { view: Extract<View, { kind: "compare" }>; selected: Set<string>; onShow: (node: string) => void }) {
  const d = view.diff;
  const node = (id: string, mark: string) => (
    <li key={`${mark}:${id}`} className={`change mark-${mark}${selected.has(id) ? " selected" : ""}`}>
      <button type="button" className="link" onClick={() => onShow(id)}>
        {mark} node <code>{id}</code>
      </button>
      {mark === "changed" && (
        <ul>
          {(view.dv.changes.get(id) ?? []).map((c, i) => (
            <li key={i} className="small">
              <code>{c.path}</code>: {c.op === "add" ? `+ ${showValue(c.to)}` : c.op === "remove" ? `− ${showValue(c.from)}` : `${showValue(c.from)} → ${showValue(c.to)}`}
            </li>
          ))}
        </ul>
      )}
    </li>
  );
  const edge = (e: { from: string; port?: string; to: string; to_port?: string }, mark: string, i: number) => (
    <li key={`e${mark}${i}`} className={`change mark-${mark}`}>
      {mark} edge <code>{`${e.from}.${e.port || "out"} → ${e.to}.${e.to_port || "in"}`}</code>
    </li>
  );
  return (
    <section className="changes" aria-label="changes between the versions" id="version-changes">
      <h3>
        Changes <code>{short(view.from.version)}</code> → <code>{short(view.to.version)}</code>
      </h3>
      <ul className="change-list">
        {d.flow.map((c, i) => (
          <li key={`f${i}`} className="change mark-changed">
            flow <code>{c.path}</code>: {showValue(c.from)} → {showValue(c.to)}
          </li>
        ))}
        {d.nodes_added.map((id) => node(id, "added"))}
        {d.nodes_removed.map((id) => node(id, "removed"))}
        {d.nodes_changed.map((c) => node(c.node, "changed"))}
        {d.edges_added.map((e, i) => edge(e, "added", i))}
        {d.edges_removed.map((e, i) => edge(e, "removed", i))}
        {d.edges_changed.map((c, i) => edge(c.to, "changed", i))}
      </ul>
      {summary(d).startsWith("no changes") && <p className="muted">{summary(d)}</p>}
    </section>
  );
}
