import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { addNote, moveNotes, noteCanvasId, noteIdOf, removeNotes, toCanvasNotes, updateNote } from "./notes";

describe("notes", () => {
  it("adds notes with ids of their own and never changes the document it is given", () => {
    const d0 = flow([["a", "input"]]);
    const { doc: d1, id } = addNote(d0, { x: 10.4, y: 20.6 }, "hi");
    const { doc: d2, id: id2 } = addNote(d1, { x: 0, y: 0 });
    expect(id).toBe("note-1");
    expect(id2).toBe("note-2");
    expect(d0.notes).toBeUndefined();
    expect(d2.notes?.[0]).toEqual({ id: "note-1", text: "hi", position: { x: 10, y: 21 } });
  });
  it("edits, moves and removes a note; the last one gone, the field goes too", () => {
    let d = addNote(flow([]), { x: 0, y: 0 }).doc;
    d = updateNote(d, "note-1", { text: "why", color: "blue", width: 300.2 });
    d = moveNotes(d, new Map([["note-1", { x: 5, y: 6 }]]));
    expect(d.notes?.[0]).toEqual({ id: "note-1", text: "why", color: "blue", width: 300, position: { x: 5, y: 6 } });
    expect(updateNote(d, "note-1", { color: "yellow" }).notes?.[0]?.color).toBeUndefined();
    expect(removeNotes(d, new Set(["note-1"])).notes).toBeUndefined();
  });
  it("puts notes on the canvas under ids no node can have", () => {
    const d = addNote(flow([["a", "input"]]), { x: 1, y: 2 }).doc;
    const [c] = toCanvasNotes(d, new Set([noteCanvasId("note-1")]));
    expect(c).toMatchObject({ id: "note:note-1", type: "note", selected: true, position: { x: 1, y: 2 } });
    expect(noteIdOf("note:note-1")).toBe("note-1");
    expect(noteIdOf("a")).toBeUndefined();
  });
});
