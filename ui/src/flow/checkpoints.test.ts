import { describe, expect, it } from "vitest";
import type { Checkpoint } from "../api/types";
import { checkpointTitle, turnNumbers } from "./checkpoints";

const ck = (id: string, kind: string, extra: Partial<Checkpoint> = {}): Checkpoint => ({ id, node: "ag", kind, step: 0, duration_ms: 0, usage: { input_tokens: 0, output_tokens: 0 }, time: "", ...extra });

describe("checkpoint titles", () => {
  it("numbers an agent's turns within their step and says what each did", () => {
    const list = [
      ck("1", "turn", { parent: "p", update: { kind: "model", message: { tool_calls: [{ name: "query_ticket" }] } }, usage: { input_tokens: 10, output_tokens: 2 } }),
      ck("2", "turn", { parent: "p", update: { kind: "tool", tool: "query_ticket" } }),
      ck("3", "turn", { parent: "p", update: { kind: "model" } }),
      ck("4", "step", { parent: "p", step: 3, duration_ms: 12 }),
    ];
    const n = turnNumbers(list);
    expect(list.map((c) => checkpointTitle(c, n.get(c.id)))).toEqual([
      "turn 1 · model reply, calls query_ticket · 10/2 tok",
      "turn 2 · tool result: query_ticket",
      "turn 3 · model reply",
      "step 3 · step · 12 ms",
    ]);
  });
  it("says a pinned step did not run", () => {
    expect(checkpointTitle(ck("1", "step", { step: 2, pinned: true }))).toBe("step 2 · step · pinned: did not run");
  });
  it("names a failed attempt by its number", () => {
    expect(checkpointTitle(ck("1", "error", { attempt: 2 }))).toBe("attempt 2 failed");
  });
});
