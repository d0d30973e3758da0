// Parameter forms from JSON Schema: what kind of field each parameter gets. The editor
// renders these descriptions; nothing here knows about React.
import type { JSONSchema } from "./types";

export type FieldKind =
  | "text" // a one-line string
  | "number"
  | "integer"
  | "boolean"
  | "enum" // one of a few values
  | "jq" // a jq expression: monospace editor
  | "template" // a text template: monospace editor
  | "duration" // "30s", "5m"
  | "secret" // an environment variable reference {"$env": "NAME"}
  | "routes" // an object of name -> jq (a router's routes)
  | "strings" // a list of strings
  | "json"; // anything else: JSON in a monospace editor

export interface Field {
  name: string;
  label: string;
  kind: FieldKind;
  description?: string;
  required: boolean;
  default?: unknown;
  options?: unknown[];
  min?: number;
  max?: number;
  pattern?: string;
  multiline: boolean;
  schema: JSONSchema;
}

export function fieldsOf(params: JSONSchema | undefined): Field[] {
  const props = params?.properties ?? {};
  const required = new Set(params?.required ?? []);
  return Object.entries(props).map(([name, s]) => fieldOf(name, s, required.has(name)));
}

export function fieldOf(name: string, s: JSONSchema, required: boolean): Field {
  const f: Field = {
    name,
    label: s.title ?? humanize(name),
    kind: kindOf(s),
    required,
    multiline: false,
    schema: s,
  };
  if (s.description) f.description = s.description;
  if (s.default !== undefined) f.default = s.default;
  if (s.enum) f.options = s.enum;
  if (s.minimum !== undefined) f.min = s.minimum;
  if (s.maximum !== undefined) f.max = s.maximum;
  if (s.pattern) f.pattern = s.pattern;
  f.multiline = f.kind === "template" || f.kind === "json" || (f.kind === "jq" && name !== "items");
  return f;
}

function kindOf(s: JSONSchema): FieldKind {
  if (s["x-secret"]) return "secret";
  if (s.enum && s.enum.length > 0) return "enum";
  const t = Array.isArray(s.type) ? (s.type.length === 1 ? s.type[0] : undefined) : s.type;
  switch (t) {
    case "string":
      if (s.format === "jq") return "jq";
      if (s.format === "template") return "template";
      if (s.format === "duration") return "duration";
      if (s.format === "json-schema") return "json";
      return "text";
    case "integer":
      return "integer";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "object": {
      const ap = s.additionalProperties;
      if (!s.properties && ap && typeof ap === "object" && ap.type === "string") return "routes";
      return "json";
    }
    case "array":
      if (s.items?.type === "string" && !s.items.format) return "strings";
      return "json";
  }
  return "json";
}

/** "max_items" -> "Max items". */
export function humanize(name: string): string {
  const s = name.replace(/[_-]+/g, " ").trim();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** A parameter's value as a form shows it: the value written, else nothing (the default shows as a placeholder). */
export function placeholderOf(f: Field): string {
  if (f.default === undefined) return f.kind === "duration" ? "e.g. 30s" : "";
  return typeof f.default === "string" ? f.default : JSON.stringify(f.default);
}

export interface EnvRef {
  $env: string;
}

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isEnvRef(v: unknown): v is EnvRef {
  return !!v && typeof v === "object" && typeof (v as EnvRef).$env === "string" && Object.keys(v as object).length === 1;
}

/**
 * Reads what a person typed into a field into the parameter's value. Returns
 * {value: undefined} for an empty field (the default applies) and {error} when the
 * text is not a value of the field's kind.
 */
export function parseField(f: Field, text: string): { value?: unknown; error?: string } {
  const t = text.trim();
  switch (f.kind) {
    case "number":
    case "integer": {
      if (t === "") return {};
      const n = Number(t);
      if (!Number.isFinite(n)) return { error: "not a number" };
      if (f.kind === "integer" && !Number.isInteger(n)) return { error: "a whole number" };
      if (f.min !== undefined && n < f.min) return { value: n, error: `at least ${f.min}` };
      if (f.max !== undefined && n > f.max) return { value: n, error: `at most ${f.max}` };
      return { value: n };
    }
    case "secret":
      if (t === "") return {};
      if (!ENV_NAME.test(t)) return { error: "an environment variable name: letters, digits and _" };
      return { value: { $env: t } };
    case "json":
      if (t === "") return {};
      try {
        return { value: JSON.parse(t) };
      } catch (e) {
        return { error: "not JSON: " + (e as Error).message };
      }
    case "strings":
      if (t === "") return {};
      return { value: text.split("\n").map((s) => s.trim()).filter((s) => s !== "") };
    default:
      return text === "" ? {} : { value: text };
  }
}

/** The text a field shows for a value (the inverse of parseField). */
export function formatField(f: Field, v: unknown): string {
  if (v === undefined || v === null) return "";
  switch (f.kind) {
    case "secret":
      return isEnvRef(v) ? v.$env : "";
    case "json":
      return JSON.stringify(v, null, 2);
    case "strings":
      return Array.isArray(v) ? v.join("\n") : "";
    case "number":
    case "integer":
      return String(v);
    default:
      return typeof v === "string" ? v : JSON.stringify(v);
  }
}

/**
 * A starting input for a test run: the input node's example, else a skeleton built from
 * its JSON Schema (each required property with an empty value of its type).
 */
export function exampleInput(example: unknown, schema: JSONSchema | undefined): unknown {
  if (example !== undefined) return example;
  if (!schema) return {};
  return skeleton(schema, 0);
}

function skeleton(s: JSONSchema, depth: number): unknown {
  if (s.default !== undefined) return s.default;
  if (s.examples && s.examples.length > 0) return s.examples[0];
  if (s.enum && s.enum.length > 0) return s.enum[0];
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (t) {
    case "object": {
      const out: Record<string, unknown> = {};
      if (depth > 4) return out;
      const props = s.properties ?? {};
      const req = s.required ?? Object.keys(props);
      for (const k of req) out[k] = props[k] ? skeleton(props[k], depth + 1) : null;
      return out;
    }
    case "array":
      return [];
    case "string":
      return "";
    case "integer":
    case "number":
      return 0;
    case "boolean":
      return false;
  }
  return s.properties ? skeleton({ ...s, type: "object" }, depth) : null;
}
