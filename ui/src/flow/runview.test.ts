import { describe, expect, it } from "vitest";
import type { Checkpoint, LiveEvent } from "../api/types";
import { flow } from "./fixtures.test-util";
import { applyEvent, formatCost, formatDuration, laterID, markNoWorker, newRunView, reconcile, runError, runUsage, toolNodeOf, withMoves, type RunView } from "./runview";

const doc = flow(
  [["in", "input"], ["r", "router"], ["a", "transform"], ["b", "transform"], ["out", "output"]],
  [{ from: "in", to: "r" }, { from: "r", port: "a", to: "a" }, { from: "r", port: "default", to: "b" }, { from: "a", to: "out" }, { from: "b", to: "out", condition: ".x" }],
);
const fold = (evs: LiveEvent[], v: RunView = newRunView("r1", doc)) => evs.reduce((acc, e) => applyEvent(acc, e, doc), v);
const ev = (type: string, node: string, data: unknown = {}): LiveEvent => ({ type, run: "r1", node, data });

describe("run view", () => {
  it("marks the node where the run moved to another version, live and from the run's record", () => {
    const live = fold([ev("dead", "a", { error: "boom" }), ev("moved", "a", { from: "v1", to: "v2abcdef" }), ev("retried", "a")]);
    expect(live.nodes.a).toMatchObject({ status: "queued", movedTo: "v2abcdef" });
    const read = withMoves(newRunView("r1", doc), [{ from: "v1", to: "v2", node: "b", at: 1 }]);
    expect(read.nodes.b?.movedTo).toBe("v2");
    expect(withMoves(live, undefined)).toBe(live);
  });
  it("starts with the input node queued", () => {
    expect(newRunView("r1", doc).nodes).toEqual({ in: expect.objectContaining({ status: "queued" }) });
  });
  it("shows a node running, then done with its duration and tokens", () => {
    const v = fold([ev("start", "a", { attempt: 1 }), ev("step", "a", { status: "done", duration_ms: 12.5, usage: { input_tokens: 10, output_tokens: 3 } })]);
    expect(v.nodes.a).toMatchObject({ status: "done", steps: 1, durationMs: 12.5, tokens: { input_tokens: 10, output_tokens: 3 } });
  });
  it("queues the nodes a router's chosen port leads to, not the others", () => {
    const v = fold([ev("step", "r", { status: "done", ports: ["a"] })]);
    expect(v.nodes.a?.status).toBe("queued");
    expect(v.nodes.b).toBeUndefined();
  });
  it("does not guess past a conditional edge", () => {
    const v = fold([ev("step", "b", { status: "done" })]);
    expect(v.nodes.out).toBeUndefined();
  });
  it("appends streamed text and shows a waiting approval's prompt", () => {
    const v = fold([ev("start", "a"), ev("token", "a", { text: "Hel" }), ev("token", "a", { text: "lo" }), ev("step", "a", { status: "waiting", prompt: "OK?" })]);
    expect(v.nodes.a).toMatchObject({ text: "Hello", status: "waiting", prompt: "OK?" });
  });
  it("shows a step waiting for a provider's rate limit, then running again", () => {
    let v = fold([ev("start", "a"), ev("rate_limit", "a", { waiting: true, provider: "openai", model: "m", wait_ms: 900 })]);
    expect(v.nodes.a).toMatchObject({ status: "waiting", prompt: "waiting for the rate limit of openai" });
    v = fold([ev("rate_limit", "a", { waiting: false, provider: "openai" })], v);
    expect(v.nodes.a?.status).toBe("running");
    expect(v.nodes.a?.prompt).toBeUndefined();
  });
  it("marks a dead-lettered node failed with its error, and a retried one queued again", () => {
    let v = fold([ev("start", "a"), ev("retry", "a", { error: "boom", attempt: 1 }), ev("dead", "a", { error: "boom", attempts: 3 })]);
    expect(v.nodes.a).toMatchObject({ status: "failed", error: "boom" });
    v = fold([ev("retried", "a")], v);
    expect(v.nodes.a?.status).toBe("queued");
  });
  it("follows the run's status and ignores other runs", () => {
    let v = fold([{ type: "run", run: "r1", data: { status: "succeeded" } }]);
    expect(v.status).toBe("succeeded");
    v = fold([{ type: "start", run: "other", node: "a" }], v);
    expect(v.nodes.a).toBeUndefined();
  });
  it("reconciles with the checkpoints: every node with a step is done when the run is", () => {
    const ck = (node: string, kind = "step"): Checkpoint => ({ id: node + "-1", node, kind, step: 1, duration_ms: 2, usage: { input_tokens: 0, output_tokens: 0 }, time: "" });
    const v = reconcile(fold([ev("start", "in")]), "succeeded", [ck("", "input"), ck("in"), ck("r"), ck("a"), ck("out")]);
    expect(Object.fromEntries(Object.entries(v.nodes).map(([k, n]) => [k, n.status]))).toEqual({ in: "done", r: "done", a: "done", out: "done" });
  });
  it("marks a step that gave back its pin as pinned, and a later step that ran as not", () => {
    let v = fold([ev("start", "a"), ev("step", "a", { status: "done", pinned: true })]);
    expect(v.nodes.a).toMatchObject({ status: "done", pinned: true });
    v = fold([ev("start", "a"), ev("step", "a", { status: "done" })], v);
    expect(v.nodes.a?.pinned).toBeUndefined();
  });
  it("reads a pinned step from its checkpoint when the live event was missed", () => {
    const ck = (node: string, extra: Partial<Checkpoint> = {}): Checkpoint => ({ id: node + "-1", node, kind: "step", step: 1, duration_ms: 0, usage: { input_tokens: 0, output_tokens: 0 }, time: "", ...extra });
    const v = reconcile(newRunView("r1", doc), "succeeded", [ck("in"), ck("a", { pinned: true })]);
    expect(v.nodes.a).toMatchObject({ status: "done", pinned: true });
    expect(v.nodes.in?.pinned).toBeUndefined();
  });
});

describe("formatDuration", () => {
  it("reads as a person would say it", () => {
    expect([formatDuration(0.2), formatDuration(12.4), formatDuration(1530), formatDuration(75_000)]).toEqual(["<1 ms", "12 ms", "1.53 s", "1 min 15 s"]);
  });
});

describe("failed attempts and tool calls", () => {
  const agentDoc = flow(
    [["in", "input"], ["ag", "agent"], ["ctx", "http"], ["out", "output"]],
    [{ from: "in", to: "ag" }, { from: "ctx", port: "tool", to: "ag", to_port: "tools" }, { from: "ag", to: "out" }],
  );
  agentDoc.nodes[2]!.params = { tool_name: "query_ticket" };
  const ck = (id: string, node: string, kind: string, extra: Partial<Checkpoint> = {}): Checkpoint => ({ id, node, kind, step: 0, duration_ms: 0, usage: { input_tokens: 0, output_tokens: 0 }, time: "", ...extra });

  it("finds the tool node an agent called by its tool name", () => {
    expect(toolNodeOf(agentDoc, "ag", "query_ticket")).toBe("ctx");
    expect(toolNodeOf(agentDoc, "ag", "ctx")).toBeUndefined();
    expect(toolNodeOf(agentDoc, "out", "query_ticket")).toBeUndefined();
  });
  it("counts a tool's calls from the agent's turns, live and after the fact", () => {
    const live = [ev("turn", "ag", { kind: "model" }), ev("turn", "ag", { kind: "tool", tool: "query_ticket" })].reduce((v, e) => applyEvent(v, e, agentDoc), newRunView("r1", agentDoc));
    expect(live.nodes.ctx).toMatchObject({ status: "done", calls: 1 });
    const after = reconcile(newRunView("r1", agentDoc), "succeeded", [ck("1-0", "ag", "turn", { update: { kind: "tool", tool: "query_ticket" } }), ck("1-1", "ag", "turn", { update: { kind: "tool", tool: "query_ticket" } }), ck("1-2", "ag", "step")], undefined, agentDoc);
    expect(after.nodes.ctx).toMatchObject({ status: "done", calls: 2 });
  });
  it("does not count a failed attempt as a step, and shows its error", () => {
    const v = reconcile(newRunView("r1", doc), "failed", [ck("1-0", "", "input"), ck("2-0", "a", "error", { attempt: 1, error: "boom 1" }), ck("3-0", "a", "error", { attempt: 2, error: "boom 2" })]);
    expect(v.nodes.a).toMatchObject({ status: "failed", error: "boom 2", attempt: 2 });
  });
  it("keeps a step done when a later attempt committed", () => {
    const v = reconcile(newRunView("r1", doc), "succeeded", [ck("2-0", "a", "error", { attempt: 1, error: "boom" }), ck("3-0", "a", "step", { attempt: 2 })]);
    expect(v.nodes.a).toMatchObject({ status: "done", steps: 1 });
  });
  it("has no error once a retried dead letter brought the run home, though last_error stays", () => {
    const dead = [ck("2-0", "a", "error", { attempt: 1, error: "boom" }), ck("3-0", "a", "error", { attempt: 2, error: "boom" })];
    const failed = reconcile(newRunView("r1", doc), "failed", dead, 'node "a": boom', doc);
    expect(runError(failed, { error: 'node "a": boom' })).toBe('node "a": boom');
    // The retry: the run goes on and succeeds; its hash has no error, only last_error.
    const run = { error: undefined, last_error: 'node "a": boom' };
    const running = reconcile(failed, "running", dead, run.error, doc);
    expect(runError(running, run)).toBeUndefined();
    const done = reconcile(running, "succeeded", [...dead, ck("4-0", "a", "step", { attempt: 1 })], run.error, doc);
    expect(done.error).toBeUndefined();
    expect(runError(done, run)).toBeUndefined();
    expect(done.nodes.a).toMatchObject({ status: "done" });
  });
  it("shows the error of a cancelled run", () => {
    const v = reconcile(newRunView("r1", doc), "cancelled", [], "cancelled", doc);
    expect(runError(v, { error: "cancelled" })).toBe("cancelled");
  });
  it("orders stream ids by time, then sequence", () => {
    expect(laterID("10-10", "10-9")).toBe(true);
    expect(laterID("9-99", "10-0")).toBe(false);
    expect(laterID("10-1.10", "10-1.9")).toBe(true);
    expect(laterID("10-1.2", "10-1")).toBe(true);
  });
});

describe("markNoWorker", () => {
  it("marks the nodes nobody serves as queued, and unmarks them once served", () => {
    const v = markNoWorker(newRunView("r1", doc), ["in"]);
    expect(v.nodes.in).toMatchObject({ status: "queued", noWorker: true });
    expect(markNoWorker(v, ["in"])).toBe(v);
    expect(markNoWorker(v, []).nodes.in?.noWorker).toBeUndefined();
  });
  it("marks nothing on a finished run", () => {
    const v = markNoWorker({ ...newRunView("r1", doc), status: "succeeded" }, ["in"]);
    expect(v.nodes.in?.noWorker).toBeUndefined();
  });
});

describe("tokens and cost", () => {
  it("adds up each node's steps and the run's nodes, with the estimated cost", () => {
    const step = (node: string, usage: Record<string, number>) => ev("step", node, { status: "done", usage });
    const v = fold([step("a", { input_tokens: 100, output_tokens: 10, cost_usd: 0.0003 }), step("a", { input_tokens: 200, output_tokens: 20, cost_usd: 0.00055 }), step("b", { input_tokens: 5, output_tokens: 1 })]);
    expect(v.nodes.a!.tokens.input_tokens).toBe(300);
    expect(v.nodes.a!.tokens.cost_usd).toBeCloseTo(0.00085, 12);
    expect(v.nodes.b!.tokens).toEqual({ input_tokens: 5, output_tokens: 1 });
    expect(formatCost(v.nodes.a!.tokens.cost_usd)).toBe("$0.0009");
    expect(formatCost(v.nodes.b!.tokens.cost_usd)).toBe("");
    expect(formatCost(0.00001)).toBe("<$0.0001");
    const total = runUsage(v);
    expect(total.input_tokens).toBe(305);
    expect(total.cost_usd).toBeCloseTo(0.00085, 12);
  });
});
