// Node ids: what the format allows (they become Redis keys and file names).
export const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export function validId(id: string): boolean {
  return ID_PATTERN.test(id);
}

/** Turns any text into something close that is a valid id ("My Flow!" -> "my-flow"). */
export function slug(text: string): string {
  const s = text
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^[-_]+|-+$/g, "")
    .slice(0, 64);
  return s || "node";
}

/** The first of base, base-2, base-3 ... that taken does not hold. */
export function uniqueId(base: string, taken: (id: string) => boolean): string {
  const b = slug(base).slice(0, 58);
  if (!taken(b)) return b;
  for (let i = 2; ; i++) {
    const id = `${b}-${i}`;
    if (!taken(id)) return id;
  }
}

/** Flow ids: a valid id, or one in a workspace, "workspace.flow" (docs/teams.md). */
export function validFlowId(id: string): boolean {
  const i = id.indexOf(".");
  return i < 0 ? validId(id) : validId(id.slice(0, i)) && validId(id.slice(i + 1));
}
