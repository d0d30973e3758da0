// The flow document and the component registry as the server sends them. These mirror
// flows/document.go and flows/registry.go; the document format is fixed ("sluice": 1).

export type PortType = "state" | "tool";
export type Direction = "in" | "out";

export interface PortSpec {
  name: string;
  direction: Direction;
  type: PortType;
  required?: boolean;
  /** An input port that takes more than one edge. */
  multiple?: boolean;
  description?: string;
}

/** A JSON Schema, as much of it as parameter forms read. */
export interface JSONSchema {
  type?: string | string[];
  format?: string;
  description?: string;
  title?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  pattern?: string;
  required?: string[];
  properties?: Record<string, JSONSchema>;
  additionalProperties?: boolean | JSONSchema;
  propertyNames?: JSONSchema;
  minProperties?: number;
  items?: JSONSchema;
  oneOf?: JSONSchema[];
  anyOf?: JSONSchema[];
  examples?: unknown[];
  "x-secret"?: boolean;
}

export interface ComponentSpec {
  name: string;
  title: string;
  category: string;
  description: string;
  ports: PortSpec[];
  /** A parameter whose keys (object) or items (array of strings) are further out ports. */
  route_ports?: string;
  routing?: boolean;
  fans?: boolean;
  params: JSONSchema;
  example?: unknown;
}

export interface Position {
  x: number;
  y: number;
}

export type Params = Record<string, unknown>;

export interface FlowNode {
  id: string;
  type: string;
  label?: string;
  description?: string;
  position?: Position;
  params?: Params;
  input?: string;
  output?: string;
  timeout?: string;
  concurrency?: number;
  cache?: { ttl: string };
}

export interface FlowEdge {
  id?: string;
  from: string;
  port?: string;
  to: string;
  to_port?: string;
  condition?: string;
}

export interface StateKey {
  reducer?: "replace" | "append" | "merge" | "add";
  default?: unknown;
  description?: string;
}

export type NoteColor = "yellow" | "blue" | "green" | "pink";

/** A sticky note on the canvas: layout only, like positions (not part of the version). */
export interface Note {
  id: string;
  text: string;
  position?: Position;
  width?: number;
  height?: number;
  color?: NoteColor;
}

export interface FlowDocument {
  sluice: 1;
  id: string;
  name?: string;
  description?: string;
  state?: Record<string, StateKey>;
  settings?: Record<string, unknown>;
  nodes: FlowNode[];
  edges: FlowEdge[];
  notes?: Note[];
}

export type Severity = "error" | "warning";

/** One validation problem, located by node id, edge name and JSON path. */
export interface Problem {
  severity: Severity;
  code: string;
  node?: string;
  edge?: string;
  path?: string;
  message: string;
}

/** The registry indexed by component name. */
export type Registry = Map<string, ComponentSpec>;

export function registryOf(specs: ComponentSpec[]): Registry {
  return new Map(specs.map((s) => [s.name, s]));
}

export const DEFAULT_OUT = "out";
export const DEFAULT_IN = "in";
