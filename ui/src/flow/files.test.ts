import { describe, expect, it } from "vitest";
import { attachFiles, fileKey } from "./files";

describe("files in a run's input", () => {
  const a = { $file: "a1", name: "a.md" };
  const b = { $file: "b2", name: "b.md" };
  it("adds references under files, after those already there", () => {
    expect(attachFiles({ question: "q" }, [a], undefined)).toEqual({ question: "q", files: [a] });
    expect(attachFiles({ files: [a] }, [b], undefined)).toEqual({ files: [a, b] });
    expect(attachFiles("not an object", [a], undefined)).toEqual({ files: [a] });
  });
  it("puts one file where the schema takes one", () => {
    const schema = { type: "object", properties: { file: { type: "object" } } };
    expect(fileKey(schema)).toEqual({ key: "file", many: false });
    expect(attachFiles({}, [a, b], schema)).toEqual({ file: b });
    const docs = { type: "object", properties: { docs: { type: "array", items: { type: "object", properties: { $file: { type: "string" } } } } } };
    expect(fileKey(docs)).toEqual({ key: "docs", many: true });
  });
});
