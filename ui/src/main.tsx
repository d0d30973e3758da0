// Entry of the editor bundle: mounts the editor island on its templ page, which hands
// over the flow and the components in a JSON script (templ.JSONScript).
import "@xyflow/react/dist/style.css";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { EditorApp, type EditorData } from "./editor/Editor";

const root = document.getElementById("editor-root");
const script = document.getElementById("editor-data");
if (root && script?.textContent) {
  const data = JSON.parse(script.textContent) as EditorData;
  createRoot(root).render(
    <StrictMode>
      <EditorApp data={data} />
    </StrictMode>,
  );
}
