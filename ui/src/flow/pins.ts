// Pinned data (what n8n calls it): a node's result held fixed for the test runs started
// from this editor, so a person can debug the rest of a flow without calling a model (or
// an HTTP API, an agent, a subflow) again. A pin is taken from one of the node's
// checkpoints — its output, its state update and the ports it chose — and sent with each
// run's start (`"pins"`, see docs/api.md); the engine then gives it back instead of
// running the node. Pins are kept per flow in this browser, never in the flow document:
// they are a way to test, not part of the flow, and must not change its version. These
// are the decisions, as plain functions; editor/pins.ts does the storage.
import type { Checkpoint } from "../api/types";
import type { FlowDocument, FlowNode } from "./types";

/** A node's fixed result, as a run's start takes it (engine.Pin). */
export interface Pin {
  output?: unknown;
  update?: Record<string, unknown>;
  /** The output ports it chose (a router's route); none: every port. */
  ports?: string[];
}

/** A pin as this browser keeps it: the pin and where it came from. */
export interface StoredPin extends Pin {
  /** The node's type when it was pinned: a node replaced by another type loses its pin. */
  type: string;
  /** The run and checkpoint it was taken from. */
  run?: string;
  checkpoint?: string;
  step?: number;
  /** When it was pinned (or last edited), ms since the epoch. */
  at: number;
  /** Changed by hand since it was taken. */
  edited?: boolean;
}

/** A flow's pins by node id. */
export type Pins = Record<string, StoredPin>;

/** The storage key of a flow's pins. */
export function pinsKey(flow: string): string {
  return `sluice:pins:${flow}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

/** Reads a flow's stored pins, dropping whatever is not a pin (storage is anyone's to write). */
export function parsePins(text: string | null): Pins {
  if (!text) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return {};
  }
  if (!isObject(v)) return {};
  const out: Pins = {};
  for (const [node, p] of Object.entries(v)) {
    if (!isObject(p) || typeof p.type !== "string" || typeof p.at !== "number") continue;
    if (p.update !== undefined && !isObject(p.update)) continue;
    if (p.ports !== undefined && !(Array.isArray(p.ports) && p.ports.every((x) => typeof x === "string"))) continue;
    out[node] = p as unknown as StoredPin;
  }
  return out;
}

export function serializePins(pins: Pins): string {
  return JSON.stringify(pins);
}

/**
 * Components whose steps call nothing outside: jq, templates, approvals. The engine runs
 * them inline and refuses pins for them (a pin would save nothing); this mirrors the
 * `Inline()` methods of flows/nodes/inline.go (cmd/sluice's TestEditorKnowsWhichNodesCanBePinned
 * keeps the two in step). A router is one of them unless it asks a model (mode "llm").
 */
export const PURE_TYPES: readonly string[] = ["input", "output", "transform", "template", "data", "fanout", "approval", "router", "join"];

/** Why a node cannot be pinned; undefined when it can. */
export function unpinnable(node: FlowNode | undefined): string | undefined {
  if (!node) return "the flow has no such node";
  if (node.type === "router") {
    return node.params?.mode === "llm" ? undefined : "a rules router calls nothing outside: it runs again as it is";
  }
  if (PURE_TYPES.includes(node.type)) return `a ${node.type} node calls nothing outside: it runs again as it is`;
  return undefined;
}

/**
 * Whether a checkpoint can become its node's pin: a step that ran (not one that gave back
 * a pin) of a node that can be pinned.
 */
export function canPin(c: Checkpoint, doc: FlowDocument): boolean {
  return c.kind === "step" && !c.pinned && unpinnable(doc.nodes.find((n) => n.id === c.node)) === undefined;
}

/** The pin a checkpoint makes: its output, update and ports. */
export function pinOf(c: Checkpoint, run: string, type: string, at: number): StoredPin {
  const p: StoredPin = { type, run, checkpoint: c.id, step: c.step, at };
  if (c.output !== undefined) p.output = c.output;
  if (isObject(c.update)) p.update = c.update;
  if (c.ports && c.ports.length > 0) p.ports = [...c.ports];
  return p;
}

export function setPin(pins: Pins, node: string, p: StoredPin): Pins {
  return { ...pins, [node]: p };
}

export function removePin(pins: Pins, node: string): Pins {
  if (!(node in pins)) return pins;
  const { [node]: _, ...rest } = pins;
  return rest;
}

/** Whether a checkpoint is what the node's pin holds (taken from it, unchanged since). */
export function isPinnedFrom(pins: Pins, c: Checkpoint, run: string): boolean {
  const p = pins[c.node];
  return !!p && !p.edited && p.run === run && p.checkpoint === c.id;
}

/** A pin that is not sent, and why. */
export interface Skipped {
  node: string;
  why: string;
}

/** What a run's start sends: the pins of nodes the flow has and that can be pinned, and the others with why. */
export function pinsToSend(pins: Pins, doc: FlowDocument): { pins: Record<string, Pin> | undefined; skipped: Skipped[] } {
  const send: Record<string, Pin> = {};
  const skipped: Skipped[] = [];
  for (const [id, p] of Object.entries(pins)) {
    const node = doc.nodes.find((n) => n.id === id);
    const why = !node ? "the flow has no node with this id any more" : node.type !== p.type ? `the node is a ${node.type} now, not a ${p.type}` : unpinnable(node);
    if (why) {
      skipped.push({ node: id, why });
      continue;
    }
    const out: Pin = {};
    if (p.output !== undefined) out.output = p.output;
    if (p.update !== undefined) out.update = p.update;
    if (p.ports) out.ports = p.ports;
    send[id] = out;
  }
  return { pins: Object.keys(send).length ? send : undefined, skipped };
}

/** The ids of the nodes whose pins a run would use (for the canvas badges). */
export function activePins(pins: Pins, doc: FlowDocument): Set<string> {
  return new Set(Object.keys(pinsToSend(pins, doc).pins ?? {}));
}

/** Where a pin came from, in a few words. */
export function pinSource(p: StoredPin): string {
  const from = p.run ? `from run ${p.run}${p.step !== undefined ? `, step ${p.step}` : ""}` : "written by hand";
  return p.edited ? `${from}, edited` : from;
}

/**
 * A pin edited by hand: the output and update as JSON text (empty: none). The update must
 * be an object (it is merged into the state with the flow's reducers).
 */
export function editPin(p: StoredPin, outputText: string, updateText: string, at: number): { pin: StoredPin } | { error: string } {
  const parse = (text: string, what: string): { v: unknown } | { error: string } => {
    if (text.trim() === "") return { v: undefined };
    try {
      return { v: JSON.parse(text) };
    } catch (e) {
      return { error: `the ${what} is not JSON: ${(e as Error).message}` };
    }
  };
  const o = parse(outputText, "output");
  if ("error" in o) return o;
  const u = parse(updateText, "update");
  if ("error" in u) return u;
  if (u.v !== undefined && !isObject(u.v)) return { error: "the update must be a JSON object (it is merged into the state)" };
  const next: StoredPin = { ...p, at, edited: true };
  delete next.output;
  delete next.update;
  if (o.v !== undefined) next.output = o.v;
  if (u.v !== undefined) next.update = u.v as Record<string, unknown>;
  return { pin: next };
}

/** JSON text of a value for an edit field ("" for none). */
export function jsonText(v: unknown): string {
  return v === undefined ? "" : JSON.stringify(v, null, 2);
}
