// The editor's keyboard shortcuts: what the help overlay (?) lists and what a key does,
// given whether a text field has the focus. In a text field the browser's own keys win
// (Ctrl+Z undoes the typing, Ctrl+A selects the text, letters type), but for saving and
// running, which mean the same everywhere.

export interface Shortcut {
  keys: string[];
  what: string;
}

export const SHORTCUTS: Shortcut[] = [
  { keys: ["Ctrl/⌘ S"], what: "Save: a valid flow is published and runs; one with errors is kept as a draft" },
  { keys: ["Ctrl/⌘ Enter"], what: "Run the flow with the Test run tab's input (saving first), also from a text field" },
  { keys: ["Ctrl/⌘ Z"], what: "Undo (in a text field: undo the typing there, as the browser does)" },
  { keys: ["Ctrl/⌘ Shift Z", "Ctrl/⌘ Y"], what: "Redo" },
  { keys: ["Ctrl/⌘ A"], what: "Select every node and note" },
  { keys: ["Ctrl/⌘ C", "Ctrl/⌘ V"], what: "Copy and paste nodes, also into another flow or tab" },
  { keys: ["Delete", "Backspace"], what: "Delete the selected nodes, edges and notes" },
  { keys: ["Esc"], what: "Close this help; else let go of the selection" },
  { keys: ["Enter"], what: "Add the component focused in the palette" },
  { keys: ["N"], what: "Add a note" },
  { keys: ["L"], what: "Auto-layout, keeping the text readable" },
  { keys: ["F"], what: "Fit the whole flow in view" },
  { keys: ["?"], what: "Show these shortcuts" },
];

export type KeyAction = "save" | "run" | "undo" | "redo" | "selectAll" | "escape" | "note" | "layout" | "fit" | "help";

/** A key press as the editor reads it. */
export interface KeyPress {
  key: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  shiftKey?: boolean;
  altKey?: boolean;
}

/** What a key press does in the editor, if anything; typing: a text field has the focus. */
export function keyAction(e: KeyPress, typing: boolean): KeyAction | undefined {
  const mod = !!(e.ctrlKey || e.metaKey);
  const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  if (mod && !e.altKey) {
    if (k === "s") return "save";
    if (k === "Enter") return "run";
    if (typing) return undefined;
    if (k === "z") return e.shiftKey ? "redo" : "undo";
    if (k === "y") return "redo";
    if (k === "a") return "selectAll";
    return undefined;
  }
  if (mod || e.altKey || typing) return undefined;
  return plainKeyAction(e.key);
}

export type PlainAction = "note" | "layout" | "fit" | "help" | "escape";

/** What a key pressed without Ctrl, ⌘ or Alt does on the canvas, if anything. */
export function plainKeyAction(key: string): PlainAction | undefined {
  switch (key) {
    case "?":
      return "help";
    case "Escape":
      return "escape";
    case "n":
    case "N":
      return "note";
    case "l":
    case "L":
      return "layout";
    case "f":
    case "F":
      return "fit";
  }
  return undefined;
}
