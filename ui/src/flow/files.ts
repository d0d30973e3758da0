// Files in a test run's input: uploaded first, then referenced ({"$file": id, ...}) in
// the input JSON, never inlined.
import type { JSONSchema } from "./types";

export interface FileRefLike {
  $file: string;
  name: string;
}

/**
 * Where the input takes files: its schema's "files" (a list) or "file" (one), else
 * "files". A single-file input gets the last file.
 */
export function fileKey(schema: JSONSchema | undefined): { key: string; many: boolean } {
  const props = schema?.properties ?? {};
  if (props.files) return { key: "files", many: true };
  if (props.file) return { key: "file", many: false };
  for (const [k, p] of Object.entries(props)) {
    const items = (p as JSONSchema).items as JSONSchema | undefined;
    if ((p as JSONSchema).type === "array" && items?.properties?.$file) return { key: k, many: true };
    if ((p as JSONSchema).properties?.$file) return { key: k, many: false };
  }
  return { key: "files", many: true };
}

/** The input with the files' references added under the key the schema wants. */
export function attachFiles(input: unknown, refs: FileRefLike[], schema: JSONSchema | undefined): Record<string, unknown> {
  const base = input && typeof input === "object" && !Array.isArray(input) ? { ...(input as Record<string, unknown>) } : {};
  if (refs.length === 0) return base;
  const { key, many } = fileKey(schema);
  if (!many) {
    base[key] = refs[refs.length - 1];
    return base;
  }
  const had = Array.isArray(base[key]) ? (base[key] as unknown[]) : [];
  base[key] = [...had, ...refs];
  return base;
}
