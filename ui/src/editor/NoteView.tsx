// A sticky note on the canvas: text typed straight onto it, resized from its edges, moved
// by its top strip. Its edits go through NoteEdits (the editor's document store).
import { NodeResizer, type NodeProps } from "@xyflow/react";
import { createContext, memo, useContext } from "react";
import type { CanvasNote } from "../flow/notes";
import { TextArea } from "./TextArea";

export interface NoteEdits {
  text(id: string, text: string): void;
  resize(id: string, box: { x: number; y: number; width: number; height: number }, done: boolean): void;
  seal(): void;
}

export const NoteEditsContext = createContext<NoteEdits | undefined>(undefined);

function NoteViewInner({ data, selected }: NodeProps<CanvasNote>) {
  const edits = useContext(NoteEditsContext);
  const { note } = data;
  return (
    <div className={`canvas-note note-${note.color ?? "yellow"}${selected ? " selected" : ""}`} data-note={note.id}>
      <NodeResizer
        isVisible={selected}
        minWidth={120}
        minHeight={60}
        onResize={(_, p) => edits?.resize(note.id, p, false)}
        onResizeEnd={(_, p) => edits?.resize(note.id, p, true)}
      />
      <div className="note-handle" title="Drag to move the note">
        note
      </div>
      <TextArea
        className="note-text nodrag nowheel"
        aria-label={`note ${note.id}`}
        placeholder="Write a note…"
        value={note.text}
        onText={(text) => edits?.text(note.id, text)}
        onBlur={() => edits?.seal()}
      />
    </div>
  );
}

export const NoteView = memo(NoteViewInner);
