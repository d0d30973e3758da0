// How a run's checkpoints read in the editor: a step says its number and kind, a turn
// (an agent's model reply or tool result, saved as it happens) says which turn of its
// step it is and what it did, a failed attempt says its number.
import type { Checkpoint } from "../api/types";
import { formatDuration } from "./runview";

/** The turns' numbers within their step (1, 2, 3 … per step), by checkpoint id. */
export function turnNumbers(list: Checkpoint[]): Map<string, number> {
  const out = new Map<string, number>();
  const per = new Map<string, number>();
  for (const c of list) {
    if (c.kind !== "turn") continue;
    const key = `${c.node} ${c.parent ?? ""}`;
    const n = (per.get(key) ?? 0) + 1;
    per.set(key, n);
    out.set(c.id, n);
  }
  return out;
}

/** One line naming a checkpoint. */
export function checkpointTitle(c: Checkpoint, turn?: number): string {
  if (c.kind === "error") return `attempt ${c.attempt ?? "?"} failed`;
  if (c.kind === "turn") {
    const t = c.update as { kind?: string; tool?: string; message?: { tool_calls?: { name?: string }[] } } | undefined;
    let what = "turn";
    if (t?.kind === "tool") what = `tool result${t.tool ? `: ${t.tool}` : ""}`;
    else if (t?.kind === "model") {
      const calls = (t.message?.tool_calls ?? []).map((x) => x.name).filter(Boolean);
      what = calls.length ? `model reply, calls ${calls.join(", ")}` : "model reply";
    }
    const tokens = c.usage && c.usage.input_tokens + c.usage.output_tokens > 0 ? ` · ${c.usage.input_tokens}/${c.usage.output_tokens} tok` : "";
    return `turn ${turn ?? "?"} · ${what}${tokens}`;
  }
  const attempt = c.attempt && c.attempt > 1 ? ` · attempt ${c.attempt}` : "";
  if (c.pinned) return `step ${c.step} · ${c.kind} · pinned: did not run${attempt}`;
  return `step ${c.step} · ${c.kind} · ${formatDuration(c.duration_ms)}${attempt}`;
}
