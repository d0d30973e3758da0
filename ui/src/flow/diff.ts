// JSON values compared: the changes between two states (as the run views show them)
// and the JSON merge patch (RFC 7386) that turns one into the other (what a fork sends).

export interface Change {
  path: string;
  op: "add" | "remove" | "replace";
  from?: unknown;
  to?: unknown;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => !!v && typeof v === "object" && !Array.isArray(v);

/** The changes from a to b by path ("a.b[2].c"), like the server's checkpoint diff. */
export function diff(a: unknown, b: unknown): Change[] {
  const out: Change[] = [];
  walk("", a, b, out);
  return out;
}

function walk(path: string, a: unknown, b: unknown, out: Change[]): void {
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) {
      const p = path ? `${path}.${k}` : k;
      if (!(k in a)) out.push({ path: p, op: "add", to: b[k] });
      else if (!(k in b)) out.push({ path: p, op: "remove", from: a[k] });
      else walk(p, a[k], b[k], out);
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const p = `${path}[${i}]`;
      if (i >= a.length) out.push({ path: p, op: "add", to: b[i] });
      else if (i >= b.length) out.push({ path: p, op: "remove", from: a[i] });
      else walk(p, a[i], b[i], out);
    }
    return;
  }
  if (!equal(a, b)) out.push({ path: path || ".", op: "replace", from: a, to: b });
}

export function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && equal(a[k], b[k]));
  }
  return false;
}

/** The merge patch that turns a into b. Undefined when they are equal. */
export function mergePatch(a: unknown, b: unknown): unknown {
  if (equal(a, b)) return undefined;
  if (!isObj(a) || !isObj(b)) return b;
  const patch: Obj = {};
  for (const k of Object.keys(a)) if (!(k in b)) patch[k] = null;
  for (const [k, v] of Object.entries(b)) {
    if (!(k in a)) patch[k] = v;
    else if (!equal(a[k], v)) patch[k] = isObj(a[k]) && isObj(v) ? mergePatch(a[k], v) : v;
  }
  return patch;
}

/** Applies a merge patch (RFC 7386). */
export function applyPatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return patch;
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyPatch(out[k], v);
  }
  return out;
}
