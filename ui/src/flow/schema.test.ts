import { describe, expect, it } from "vitest";
import { reg } from "./fixtures.test-util";
import { exampleInput, fieldsOf, formatField, parseField } from "./schema";

const kinds = (name: string) => Object.fromEntries(fieldsOf(reg.get(name)!.params).map((f) => [f.name, f.kind]));

describe("fieldsOf", () => {
  it("gives each kind of parameter its field", () => {
    expect(kinds("agent")).toEqual({
      api_key: "secret", model: "text", temperature: "number", stream: "boolean", mode: "enum",
      timeout: "duration", prompt: "template", stop: "strings",
    });
  });
  it("edits jq in a code field and a router's routes as named rows", () => {
    expect(kinds("transform")).toEqual({ expr: "jq" });
    expect(kinds("router")).toEqual({ routes: "routes" });
  });
  it("edits a JSON Schema or an untyped value as JSON", () => {
    expect(kinds("input")).toEqual({ schema: "json", example: "json" });
  });
  it("marks required parameters and keeps defaults for placeholders", () => {
    const [expr] = fieldsOf(reg.get("transform")!.params);
    expect(expr!.required).toBe(true);
    const [value] = fieldsOf(reg.get("output")!.params);
    expect(value!.default).toBe(".");
  });
});

describe("parseField", () => {
  const f = Object.fromEntries(fieldsOf(reg.get("agent")!.params).map((x) => [x.name, x]));
  const json = fieldsOf(reg.get("input")!.params)[0]!;
  it("reads numbers and says when out of range", () => {
    expect(parseField(f.temperature!, "0.5")).toEqual({ value: 0.5 });
    expect(parseField(f.temperature!, "3").error).toBe("at most 2");
    expect(parseField(f.temperature!, "x").error).toBe("not a number");
  });
  it("turns an empty field into no value, so the default applies", () => {
    expect(parseField(f.temperature!, "")).toEqual({});
    expect(parseField(f.model!, "")).toEqual({});
  });
  it("writes a secret as an environment reference, never as text", () => {
    expect(parseField(f.api_key!, "OPENAI_API_KEY")).toEqual({ value: { $env: "OPENAI_API_KEY" } });
    expect(parseField(f.api_key!, "sk-123").error).toMatch(/environment variable name/);
    expect(formatField(f.api_key!, { $env: "X" })).toBe("X");
  });
  it("reads JSON and reports bad JSON", () => {
    expect(parseField(json, '{"type": "object"}')).toEqual({ value: { type: "object" } });
    expect(parseField(json, "{").error).toMatch(/^not JSON/);
  });
  it("reads a list of strings one per line", () => {
    expect(parseField(f.stop!, "a\n\n b \n")).toEqual({ value: ["a", "b"] });
    expect(formatField(f.stop!, ["a", "b"])).toBe("a\nb");
  });
});

describe("exampleInput", () => {
  it("prefers the input node's example", () => {
    expect(exampleInput({ name: "Ada" }, { type: "object" })).toEqual({ name: "Ada" });
  });
  it("builds the required properties of the schema", () => {
    const schema = { type: "object", required: ["q", "n"], properties: { q: { type: "string" }, n: { type: "integer" }, opt: { type: "string" } } };
    expect(exampleInput(undefined, schema)).toEqual({ q: "", n: 0 });
  });
  it("is an empty object without either", () => {
    expect(exampleInput(undefined, undefined)).toEqual({});
  });
});
