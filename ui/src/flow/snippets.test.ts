import { describe, expect, it } from "vitest";
import { goString, LANGUAGES, mcpArguments, pyValue, snippets, takesChat, type SnippetContext } from "./snippets";

const ctx: SnippetContext = { origin: "http://sluice.example:8080", flow: "triage", auth: true, input: { intent: "code", ok: true, n: null }, hook: { enabled: true, secretEnv: "SLUICE_HOOK_SECRET_TRIAGE" } };

describe("API snippets", () => {
  it("fill in the server, the flow and the input in every language", () => {
    for (const { id } of LANGUAGES) {
      const list = snippets(id, ctx);
      expect(list.map((s) => s.kind)).toEqual(["start", "events", "webhook", "ingress"]);
      const start = list[0]!.code;
      expect(start).toContain("http://sluice.example:8080");
      expect(start).toContain("/api/flows/triage/runs");
      expect(start).toContain('"intent"');
      expect(list[3]!.code).toContain("/hooks/triage");
    }
  });
  it("read the token from SLUICE_TOKEN when the server needs one, and never otherwise", () => {
    for (const { id } of LANGUAGES) {
      expect(snippets(id, ctx)[0]!.code).toContain("SLUICE_TOKEN");
      const open = snippets(id, { ...ctx, auth: false });
      expect(open[0]!.code).not.toContain("SLUICE_TOKEN");
      expect(open[1]!.code).not.toContain("Authorization");
    }
  });
  it("say how to turn the webhook ingress on when it is off", () => {
    expect(snippets("curl", { ...ctx, hook: { enabled: false, secretEnv: "SLUICE_HOOK_SECRET_TRIAGE" } })[3]!.about).toContain("set SLUICE_HOOK_SECRET_TRIAGE");
  });
  it("give the webhook receivers the plain HTTP address they listen on", () => {
    for (const id of ["python", "javascript", "go"] as const) {
      const code = snippets(id, ctx)[2]!.code;
      expect(code).toContain("9000");
      expect(code).toContain("http://your.service:9000/sluice-result");
      expect(code).not.toMatch(/https:\/\/[^ ]*:9000/);
    }
  });
  it("imports os in Go only when it reads the token", () => {
    expect(snippets("go", ctx)[0]!.code).toContain('"os"');
    expect(snippets("go", { ...ctx, auth: false })[0]!.code).not.toContain('"os"');
  });
  it("write JSON values as Python and Go literals", () => {
    expect(pyValue({ a: [true, false, null, 1.5, "x"] })).toBe('{"a": [True, False, None, 1.5, "x"]}');
    expect(goString('{"a":1}')).toBe('`{"a":1}`');
    expect(goString("a`b")).toBe('"a`b"');
  });
  it("offer a chat completion only for a flow that takes chat messages, with the flow as the model", () => {
    for (const { id } of LANGUAGES) {
      expect(snippets(id, ctx).map((s) => s.kind)).not.toContain("chat");
      const chat = snippets(id, { ...ctx, chat: true }).find((s) => s.kind === "chat")!;
      expect(chat.code).toContain("http://sluice.example:8080/v1");
      expect(chat.code).toContain('"triage"');
      expect(chat.code).toContain("SLUICE_TOKEN");
      expect(snippets(id, { ...ctx, chat: true, auth: false }).find((s) => s.kind === "chat")!.code).not.toContain("SLUICE_TOKEN");
    }
    expect(snippets("curl", { ...ctx, chat: true }).find((s) => s.kind === "chat")!.code).toContain("/v1/chat/completions");
  });
  it("offer an MCP call only for a flow offered over MCP, naming the flow as the tool", () => {
    const mcp = { arguments: { intent: "code" } };
    for (const { id } of LANGUAGES) {
      expect(snippets(id, ctx).map((s) => s.kind)).not.toContain("mcp");
      const s = snippets(id, { ...ctx, mcp }).find((s) => s.kind === "mcp")!;
      expect(s.code).toContain("http://sluice.example:8080/mcp");
      expect(s.code).toContain("SLUICE_TOKEN");
      if (id !== "curl") {
        expect(s.code).toContain('"triage"');
        expect(s.code).toContain('"intent"');
      }
    }
    const config = JSON.parse(snippets("curl", { ...ctx, mcp }).find((s) => s.kind === "mcp")!.code);
    expect(config).toEqual({ mcpServers: { sluice: { type: "http", url: "http://sluice.example:8080/mcp", headers: { Authorization: "Bearer ${SLUICE_TOKEN}" } } } });
    expect(JSON.parse(snippets("curl", { ...ctx, mcp, auth: false }).find((s) => s.kind === "mcp")!.code).mcpServers.sluice.headers).toBeUndefined();
  });
  it("know a chat flow by its input's messages array, as the server does", () => {
    expect(takesChat({ type: "object", properties: { messages: { type: "array" } } })).toBe(true);
    expect(takesChat({ type: "object", properties: { messages: { type: ["array", "null"] } } })).toBe(true);
    expect(takesChat({ type: "object", properties: { messages: { type: "string" } } })).toBe(false);
    expect(takesChat(undefined)).toBe(false);
  });
  it("call a flow whose input is not an object with {input} over MCP, as the server wraps it", () => {
    expect(mcpArguments({ type: "object" }, { a: 1 })).toEqual({ a: 1 });
    expect(mcpArguments(undefined, { a: 1 })).toEqual({ a: 1 });
    expect(mcpArguments({ type: "string" }, "hi")).toEqual({ input: "hi" });
  });
});
