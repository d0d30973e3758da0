// Entry of the editor bundle. Each island finds its root element on a templ page and
// mounts there; pages without an island load nothing else.
import { createRoot } from "react-dom/client";
import { StrictMode } from "react";

function App() {
  return <p className="muted">The flow editor loads here.</p>;
}

const root = document.getElementById("editor-root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
