import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { decideRestore, parseStored, saveStateText, savedMessage, serialize, storageKey } from "./workingcopy";

const server = flow([["a", "transform"]]);
const edited = flow([["a", "transform"], ["b", "output"]]);

describe("decideRestore", () => {
  it("restores edits the server never got", () => {
    const d = decideRestore(serialize(server), { doc: serialize(edited), base: serialize(server), at: 1 });
    expect(d).toEqual({ kind: "restore", doc: edited });
  });
  it("does nothing when the copy is what was loaded, or there is none", () => {
    expect(decideRestore(serialize(server), { doc: serialize(server), base: "", at: 1 })).toEqual({ kind: "none" });
    expect(decideRestore(serialize(server), undefined)).toEqual({ kind: "none" });
  });
  it("only offers a copy made on an older version of the flow", () => {
    const other = flow([["z", "input"]]);
    expect(decideRestore(serialize(server), { doc: serialize(edited), base: serialize(other), at: 7 })).toEqual({ kind: "offer", doc: edited, at: 7 });
  });
  it("ignores a copy that is not a flow document", () => {
    expect(decideRestore(serialize(server), { doc: "[1]", base: serialize(server), at: 1 })).toEqual({ kind: "none" });
    expect(decideRestore(serialize(server), { doc: "{", base: serialize(server), at: 1 })).toEqual({ kind: "none" });
  });
});

describe("stored copies", () => {
  it("reads back what was written and refuses anything else", () => {
    const c = { doc: "{}", base: "", at: 3 };
    expect(parseStored(JSON.stringify(c))).toEqual(c);
    expect(parseStored("nope")).toBeUndefined();
    expect(parseStored(JSON.stringify({ doc: 1 }))).toBeUndefined();
    expect(parseStored(null)).toBeUndefined();
  });
  it("keeps a new flow's copy apart from a saved flow's", () => {
    expect(storageKey("x", true)).not.toBe(storageKey("x", false));
  });
});

describe("the save state", () => {
  const base = { isNew: false, saving: false, dirty: false, draft: false, autosaveError: undefined };
  it("names every state a person meets", () => {
    expect(saveStateText(base)).toBe("Saved");
    expect(saveStateText({ ...base, draft: true })).toBe("Draft saved");
    expect(saveStateText({ ...base, dirty: true })).toBe("Unsaved changes");
    expect(saveStateText({ ...base, dirty: true, autosaveError: "the server cannot be reached" })).toContain("not saved: the server cannot be reached");
    expect(saveStateText({ ...base, isNew: true })).toBe("Not saved yet");
    expect(saveStateText({ ...base, saving: true })).toBe("Saving…");
  });
  it("says why a save stayed a draft", () => {
    expect(savedMessage(true, 0, true)).toBe("Saved");
    expect(savedMessage(false, 1, false)).toBe("Saved as a draft: 1 error to fix before it can run");
    expect(savedMessage(false, 2, true)).toContain("runs use the last saved version");
  });
});
