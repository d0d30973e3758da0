// The tools of an mcp node's server, listed on demand in the inspector: the server
// connects the way a worker of this Sluice would, so what shows here is what an agent
// gets (or why it would not).
import { useState } from "react";
import { ApiError, api, type ToolDef } from "../api/client";

export function MCPTools({ params }: { params: Record<string, unknown> }) {
  const [tools, setTools] = useState<ToolDef[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const list = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setTools(await api.mcpTools(params));
    } catch (e) {
      setTools(undefined);
      setError(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="mcp-tools" aria-label="server tools">
      <h3>Server tools</h3>
      <button type="button" onClick={list} disabled={busy} data-mcp-list>
        {busy ? "Connecting…" : tools ? "List again" : "List the server’s tools"}
      </button>
      {error && <p className="error small">{error}</p>}
      {tools && tools.length === 0 && <p className="muted small">The server offers no tool (that the node allows).</p>}
      {tools && tools.length > 0 && (
        <ul className="mcp-tool-list">
          {tools.map((t) => (
            <li key={t.name}>
              <code>{t.name}</code> <span className="muted small">{t.description}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
