import { describe, expect, it } from "vitest";
import { goString, LANGUAGES, pyValue, snippets, type SnippetContext } from "./snippets";

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
});
