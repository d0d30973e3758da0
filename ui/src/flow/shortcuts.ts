// The editor's keyboard shortcuts: what the help overlay (?) lists and what a plain key
// pressed on the canvas (no modifier, not in a text field) does.

export interface Shortcut {
  keys: string[];
  what: string;
}

export const SHORTCUTS: Shortcut[] = [
  { keys: ["Ctrl/⌘ S"], what: "Save: a valid flow is published and runs; one with errors is kept as a draft" },
  { keys: ["Ctrl/⌘ Z"], what: "Undo" },
  { keys: ["Ctrl/⌘ Shift Z", "Ctrl/⌘ Y"], what: "Redo" },
  { keys: ["Ctrl/⌘ C", "Ctrl/⌘ V"], what: "Copy and paste nodes, also into another flow or tab" },
  { keys: ["Delete", "Backspace"], what: "Delete the selected nodes, edges and notes" },
  { keys: ["Enter"], what: "Add the component focused in the palette" },
  { keys: ["N"], what: "Add a note" },
  { keys: ["L"], what: "Auto-layout, keeping the text readable" },
  { keys: ["F"], what: "Fit the whole flow in view" },
  { keys: ["?"], what: "Show these shortcuts" },
  { keys: ["Esc"], what: "Close this help" },
];

export type PlainAction = "note" | "layout" | "fit" | "help" | "close";

/** What a key pressed without Ctrl, ⌘ or Alt does on the canvas, if anything. */
export function plainKeyAction(key: string): PlainAction | undefined {
  switch (key) {
    case "?":
      return "help";
    case "Escape":
      return "close";
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
