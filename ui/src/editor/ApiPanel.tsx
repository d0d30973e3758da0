// The API panel: how to run this flow from elsewhere, in curl, Python, JavaScript or Go,
// with this server's address and authentication filled in (flow/snippets.ts); as a model
// through /v1/chat/completions when its input takes chat messages, and as an MCP tool
// when the flow is offered over MCP.
import { useEffect, useMemo, useState } from "react";
import { api } from "../api/client";
import { exampleInput } from "../flow/schema";
import { offeredOverMCP } from "../flow/settings";
import { LANGUAGES, mcpArguments, snippets, takesChat, type Language } from "../flow/snippets";
import type { FlowDocument, JSONSchema } from "../flow/types";

interface Props {
  doc: FlowDocument;
  auth: boolean;
  isNew: boolean;
  onCopied: (what: string) => void;
}

const LANG_KEY = "sluice:api-language";

export function ApiPanel({ doc, auth, isNew, onCopied }: Props) {
  const [lang, setLang] = useState<Language>(() => (localStorage.getItem(LANG_KEY) as Language | null) ?? "curl");
  const [hook, setHook] = useState({ enabled: false, secretEnv: "" });
  useEffect(() => {
    if (isNew) return;
    let live = true;
    void api
      .hookInfo(doc.id)
      .then((h) => live && setHook({ enabled: h.enabled, secretEnv: h.secret_env }))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [doc.id, isNew]);
  const entry = doc.nodes.find((n) => n.type === "input");
  const schema = entry?.params?.schema as JSONSchema | undefined;
  const input = useMemo(() => exampleInput(entry?.params?.example, schema), [entry, schema]);
  if (isNew) return <p className="muted">Save the flow first: then it can be run from anywhere with the API.</p>;
  const list = snippets(lang, { origin: location.origin, flow: doc.id, auth, input, hook: { enabled: hook.enabled, secretEnv: hook.secretEnv || `SLUICE_HOOK_SECRET_${doc.id.toUpperCase().replace(/-/g, "_")}` },
    chat: takesChat(schema),
    ...(offeredOverMCP(doc) ? { mcp: { arguments: mcpArguments(schema, input) } } : {}),
  });
  const choose = (l: Language) => {
    setLang(l);
    localStorage.setItem(LANG_KEY, l);
  };
  return (
    <div className="api-panel">
      <p className="muted small">
        Run “{doc.name || doc.id}” from your own code. {auth ? "The server needs its token: these read it from SLUICE_TOKEN." : "This server needs no token."} The full reference is at <a href="/api/openapi.json">/api/openapi.json</a>.
      </p>
      <div className="lang-tabs" role="tablist" aria-label="Language">
        {LANGUAGES.map((l) => (
          <button key={l.id} type="button" role="tab" aria-selected={lang === l.id} data-lang={l.id} onClick={() => choose(l.id)}>
            {l.title}
          </button>
        ))}
      </div>
      {list.map((s) => (
        <section key={s.kind} className="snippet" data-snippet={s.kind}>
          <div className="snippet-head">
            <h3>{s.title}</h3>
            <button
              type="button"
              className="copy"
              onClick={() => {
                void navigator.clipboard?.writeText(s.code).catch(() => undefined);
                onCopied(s.title);
              }}
            >
              Copy
            </button>
          </div>
          <p className="muted small">{s.about}</p>
          <pre className="code">{s.code}</pre>
        </section>
      ))}
    </div>
  );
}
