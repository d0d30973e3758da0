// Code to call a flow from elsewhere — curl, Python, JavaScript and Go — with this
// server's address and its authentication filled in: start a run and wait for its
// result, stream a run's events, be told of a result by webhook, and let another service
// start runs through the flow's webhook ingress; for a flow whose input takes chat
// messages, call it as a model through /v1/chat/completions; for a flow offered over MCP,
// call it as a tool. The token is never written into a snippet: it is read from the
// SLUICE_TOKEN environment variable.

import type { JSONSchema } from "./types";

export type Language = "curl" | "python" | "javascript" | "go";
export const LANGUAGES: { id: Language; title: string }[] = [
  { id: "curl", title: "curl" },
  { id: "python", title: "Python" },
  { id: "javascript", title: "JavaScript" },
  { id: "go", title: "Go" },
];

export interface SnippetContext {
  /** This server, e.g. http://localhost:8080. */
  origin: string;
  flow: string;
  /** The server needs a token (SLUICE_TOKEN). */
  auth: boolean;
  /** A sample input, e.g. the input node's example. */
  input: unknown;
  /** The flow's webhook ingress: on when the server has its secret, in secretEnv. */
  hook: { enabled: boolean; secretEnv: string };
  /** The flow's input takes chat messages: it can be called as a model (takesChat). */
  chat?: boolean;
  /** The flow is offered over MCP (settings.mcp), called with these arguments (mcpArguments). */
  mcp?: { arguments: unknown };
}

export type SnippetKind = "start" | "events" | "webhook" | "ingress" | "chat" | "mcp";

/**
 * Whether a flow whose input node has this schema takes chat messages — a "messages"
 * property of type array — so that /v1/chat/completions and /v1/models offer it
 * (chatFlow in server/openai.go).
 */
export function takesChat(schema: JSONSchema | undefined): boolean {
  const t = schema?.properties?.messages?.type;
  return t === "array" || (Array.isArray(t) && t.includes("array"));
}

/**
 * The arguments of an MCP call of the flow for a sample input: the input itself when the
 * input schema is an object (or there is none), else {"input": …} (flowTool in
 * server/mcp.go).
 */
export function mcpArguments(schema: JSONSchema | undefined, input: unknown): unknown {
  if (!schema || schema.type === "object") return input ?? {};
  return { input };
}

export interface Snippet {
  kind: SnippetKind;
  title: string;
  /** What it does and what comes back. */
  about: string;
  code: string;
}

const FINISHED = `"succeeded", "failed", "cancelled"`;

function q(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function snippets(lang: Language, c: SnippetContext): Snippet[] {
  const runs = `/api/flows/${c.flow}/runs`;
  const input = JSON.stringify(c.input ?? {});
  const body = JSON.stringify({ input: c.input ?? {} });
  const secret = c.hook.secretEnv;
  const ingressAbout = c.hook.enabled
    ? `Another service starts a run by POSTing its JSON to /hooks/${c.flow}, proving it knows the flow's secret (the server's ${secret}): as a bearer token, or by signing the body.`
    : `Not on yet: set ${secret} (a random secret) in the server's environment to let other services start runs at /hooks/${c.flow}.`;
  const start: Snippet = { kind: "start", title: "Start a run and wait for its result", about: "202 with the run's id at once; with ?wait=60s the finished run (status, output) when it ends in time.", code: "" };
  const events: Snippet = { kind: "events", title: "Stream a run's events", about: "Server-Sent Events: every step, token and status of the run as it happens, from its start (Last-Event-ID: 0-0).", code: "" };
  const webhook: Snippet = {
    kind: "webhook",
    title: "Be told when a run finishes (result webhook)",
    about: `Sluice POSTs {flow, run, status, output, error, finished_at} to the run's webhook when it ends, retrying until a 2xx.${c.hook.enabled ? ` X-Sluice-Signature signs the body with ${secret}.` : ""}`,
    code: "",
  };
  const ingress: Snippet = { kind: "ingress", title: "Let another service start runs (webhook ingress)", about: ingressAbout, code: "" };
  const chat: Snippet = {
    kind: "chat",
    title: "Call it as a model (OpenAI-compatible)",
    about: `The flow takes chat messages, so any OpenAI SDK or chat UI can call it: base URL ${c.origin}/v1, model "${c.flow}". The answer is the run's output; stream: true streams the run's tokens.${c.auth ? " The API key is the server's token." : " Any API key does: this server needs no token."}`,
    code: "",
  };
  const mcpArgs = JSON.stringify(c.mcp?.arguments ?? {});
  const mcp: Snippet = {
    kind: "mcp",
    title: "Call it as an MCP tool",
    about:
      lang === "curl"
        ? `The flow is offered over MCP as the tool "${c.flow}" at ${c.origin}/mcp (Streamable HTTP). Add the server to an MCP client's config (Claude Code's .mcp.json, Cursor, VS Code…)${c.auth ? "; clients that expand ${SLUICE_TOKEN} read the token from the environment, others need it written in" : ""}. Clients that only start commands use \`sluice mcp\` (docs/mcp.md).`
        : `The flow is offered over MCP as the tool "${c.flow}" at ${c.origin}/mcp (Streamable HTTP): a call runs it and answers with its output; a run waiting for an approval is reported, not waited on.`,
    code: "",
  };
  const chatBody = { model: c.flow, messages: [{ role: "user", content: "Hello" }] };

  switch (lang) {
    case "curl": {
      const auth = c.auth ? ` \\\n  -H "Authorization: Bearer $SLUICE_TOKEN"` : "";
      start.code = `curl -s -X POST ${q(`${c.origin}${runs}?wait=60s`)} \\\n  -H 'Content-Type: application/json'${auth} \\\n  -d ${q(body)}`;
      events.code = `RUN=$(curl -s -X POST ${q(c.origin + runs)} -H 'Content-Type: application/json'${auth} -d ${q(body)} | sed -E 's/.*"run":"([^"]+)".*/\\1/')\ncurl -s -N "${c.origin}${runs}/$RUN/events" -H 'Last-Event-ID: 0-0'${auth}`;
      webhook.code = `# Start a run whose result is POSTed to your service when it finishes:\ncurl -s -X POST ${q(c.origin + runs)} \\\n  -H 'Content-Type: application/json'${auth} \\\n  -d ${q(JSON.stringify({ input: c.input ?? {}, webhook: "https://your.service/sluice-result" }))}`;
      ingress.code = `curl -s -X POST ${q(`${c.origin}/hooks/${c.flow}`)} \\\n  -H "Authorization: Bearer $${secret}" \\\n  -H 'Content-Type: application/json' -H 'Idempotency-Key: event-123' \\\n  -d ${q(input)}\n# or sign the body instead of sending the secret:\nbody=${q(input)}\nsig=$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$${secret}" | sed 's/^.* //')\ncurl -s -X POST ${q(`${c.origin}/hooks/${c.flow}`)} -H "X-Sluice-Signature: sha256=$sig" \\\n  -H 'Content-Type: application/json' -d "$body"`;
      chat.code = `curl -s ${q(`${c.origin}/v1/chat/completions`)} \\\n  -H 'Content-Type: application/json'${auth} \\\n  -d ${q(JSON.stringify(chatBody))}\n# "stream": true answers with server-sent chat.completion.chunk events`;
      mcp.code = JSON.stringify({ mcpServers: { sluice: { type: "http", url: `${c.origin}/mcp`, ...(c.auth ? { headers: { Authorization: "Bearer ${SLUICE_TOKEN}" } } : {}) } } }, null, 2);
      break;
    }
    case "python": {
      const head = `import json, os, urllib.request\n\nBASE = ${JSON.stringify(c.origin)}\nHEADERS = {"Content-Type": "application/json"${c.auth ? `, "Authorization": "Bearer " + os.environ["SLUICE_TOKEN"]` : ""}}\n\n\ndef call(method, path, body=None, headers=None):\n    data = None if body is None else json.dumps(body).encode()\n    req = urllib.request.Request(BASE + path, data=data, method=method, headers={**HEADERS, **(headers or {})})\n    with urllib.request.urlopen(req) as res:\n        return json.load(res)\n\n`;
      start.code = `${head}\n# Start a run and wait for it (or for a person it waits for).\nrun = call("POST", "${runs}?wait=60s", {"input": ${pyValue(c.input)}})\nwhile run["status"] in ("queued", "running"):\n    run = call("GET", "${runs}/" + (run.get("id") or run["run"]) + "?wait=60s")\nprint(run["status"], json.dumps(run.get("output")))\n`;
      events.code = `${head}\nstarted = call("POST", "${runs}", {"input": ${pyValue(c.input)}})\nreq = urllib.request.Request(BASE + "${runs}/" + started["run"] + "/events", headers={**HEADERS, "Last-Event-ID": "0-0"})\nwith urllib.request.urlopen(req) as stream:\n    for line in stream:\n        if not line.startswith(b"data: "):\n            continue\n        event = json.loads(line[6:]).get("event") or {}\n        print(event.get("type"), event.get("node", ""), json.dumps(event.get("data")))\n        if event.get("type") == "run" and (event.get("data") or {}).get("status") in (${FINISHED}):\n            break\n`;
      webhook.code = `# A receiver for the run's result (standard library only).\nimport hashlib, hmac, json, os\nfrom http.server import BaseHTTPRequestHandler, HTTPServer\n\nclass Result(BaseHTTPRequestHandler):\n    def do_POST(self):\n        body = self.rfile.read(int(self.headers["Content-Length"]))\n${c.hook.enabled ? `        want = "sha256=" + hmac.new(os.environ["${secret}"].encode(), body, hashlib.sha256).hexdigest()\n        if not hmac.compare_digest(want, self.headers.get("X-Sluice-Signature", "")):\n            self.send_response(401); self.end_headers(); return\n` : ""}        result = json.loads(body)  # deliveries repeat: deduplicate on X-Sluice-Delivery\n        print(result["run"], result["status"], result.get("output"))\n        self.send_response(204); self.end_headers()\n\nHTTPServer(("", 9000), Result).serve_forever()\n# It serves plain HTTP on port 9000: start runs with\n# {"input": ..., "webhook": "http://your.service:9000/sluice-result"}\n# (behind a TLS proxy, give the proxy's https:// address instead).\n`;
      ingress.code = `import json, os, urllib.request\n\nreq = urllib.request.Request(${JSON.stringify(`${c.origin}/hooks/${c.flow}`)}, method="POST",\n    data=json.dumps(${pyValue(c.input)}).encode(),\n    headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["${secret}"],\n             "Idempotency-Key": "event-123"})\nwith urllib.request.urlopen(req) as res:\n    print(json.load(res)["run"])\n`;
      chat.code = `# pip install openai\n${c.auth ? "import os\n" : ""}from openai import OpenAI\n\nclient = OpenAI(base_url=${JSON.stringify(`${c.origin}/v1`)}, api_key=${c.auth ? `os.environ["SLUICE_TOKEN"]` : `"unused"`})\nreply = client.chat.completions.create(model=${JSON.stringify(c.flow)}, messages=[{"role": "user", "content": "Hello"}])\nprint(reply.choices[0].message.content)\n\n# Streamed: the run's tokens as they come.\nfor chunk in client.chat.completions.create(model=${JSON.stringify(c.flow)}, messages=[{"role": "user", "content": "Hello"}], stream=True):\n    if chunk.choices:\n        print(chunk.choices[0].delta.content or "", end="", flush=True)\n`;
      mcp.code = `# pip install mcp\nimport asyncio${c.auth ? ", os" : ""}\nfrom mcp import ClientSession\nfrom mcp.client.streamable_http import streamablehttp_client\n\n\nasync def main():\n    headers = ${c.auth ? `{"Authorization": "Bearer " + os.environ["SLUICE_TOKEN"]}` : "{}"}\n    async with streamablehttp_client(${JSON.stringify(`${c.origin}/mcp`)}, headers=headers) as (read, write, _):\n        async with ClientSession(read, write) as session:\n            await session.initialize()\n            result = await session.call_tool(${JSON.stringify(c.flow)}, ${pyValue(c.mcp?.arguments ?? {})})\n            print(result.isError, result.structuredContent or [b.text for b in result.content if b.type == "text"])\n\n\nasyncio.run(main())\n`;
      break;
    }
    case "javascript": {
      const head = `// Node 18+ or a browser.\nconst BASE = ${JSON.stringify(c.origin)};\nconst headers = { "Content-Type": "application/json"${c.auth ? ", Authorization: `Bearer ${process.env.SLUICE_TOKEN}`" : ""} };\n`;
      start.code = `${head}\n// Start a run and wait for it (or for a person it waits for).\nlet run = await (await fetch(\`\${BASE}${runs}?wait=60s\`, { method: "POST", headers, body: JSON.stringify({ input: ${input} }) })).json();\nwhile (run.status === "queued" || run.status === "running") {\n  run = await (await fetch(\`\${BASE}${runs}/\${run.id ?? run.run}?wait=60s\`, { headers })).json();\n}\nconsole.log(run.status, JSON.stringify(run.output));\n`;
      events.code = `${head}\nconst started = await (await fetch(\`\${BASE}${runs}\`, { method: "POST", headers, body: JSON.stringify({ input: ${input} }) })).json();\nconst res = await fetch(\`\${BASE}${runs}/\${started.run}/events\`, { headers: { ...headers, "Last-Event-ID": "0-0" } });\nconst reader = res.body.pipeThrough(new TextDecoderStream()).getReader();\nlet buf = "";\nread: for (;;) {\n  const { value, done } = await reader.read();\n  if (done) break;\n  buf += value;\n  for (let i; (i = buf.indexOf("\\n")) >= 0; ) {\n    const line = buf.slice(0, i);\n    buf = buf.slice(i + 1);\n    if (!line.startsWith("data: ")) continue;\n    const event = JSON.parse(line.slice(6)).event ?? {};\n    console.log(event.type, event.node ?? "", JSON.stringify(event.data));\n    if (event.type === "run" && [${FINISHED}].includes(event.data?.status)) {\n      await reader.cancel();\n      break read;\n    }\n  }\n}\n`;
      webhook.code = `// A receiver for the run's result (Node).\nimport { createServer } from "node:http";\n${c.hook.enabled ? `import { createHmac, timingSafeEqual } from "node:crypto";\n` : ""}\ncreateServer(async (req, res) => {\n  let body = "";\n  for await (const chunk of req) body += chunk;\n${c.hook.enabled ? `  const want = "sha256=" + createHmac("sha256", process.env.${secret}).update(body).digest("hex");\n  const got = req.headers["x-sluice-signature"] ?? "";\n  if (got.length !== want.length || !timingSafeEqual(Buffer.from(got), Buffer.from(want))) return res.writeHead(401).end();\n` : ""}  const result = JSON.parse(body); // deliveries repeat: deduplicate on x-sluice-delivery\n  console.log(result.run, result.status, result.output);\n  res.writeHead(204).end();\n}).listen(9000);\n// It serves plain HTTP on port 9000: start runs with\n// { input, webhook: "http://your.service:9000/sluice-result" }\n// (behind a TLS proxy, give the proxy's https:// address instead).\n`;
      ingress.code = `const res = await fetch(${JSON.stringify(`${c.origin}/hooks/${c.flow}`)}, {\n  method: "POST",\n  headers: { "Content-Type": "application/json", Authorization: \`Bearer \${process.env.${secret}}\`, "Idempotency-Key": "event-123" },\n  body: JSON.stringify(${input}),\n});\nconsole.log((await res.json()).run);\n`;
      chat.code = `// npm install openai\nimport OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: ${JSON.stringify(`${c.origin}/v1`)}, apiKey: ${c.auth ? "process.env.SLUICE_TOKEN" : `"unused"`} });\nconst reply = await client.chat.completions.create({ model: ${JSON.stringify(c.flow)}, messages: [{ role: "user", content: "Hello" }] });\nconsole.log(reply.choices[0].message.content);\n\n// Streamed: the run's tokens as they come.\nconst stream = await client.chat.completions.create({ model: ${JSON.stringify(c.flow)}, messages: [{ role: "user", content: "Hello" }], stream: true });\nfor await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");\n`;
      mcp.code = `// npm install @modelcontextprotocol/sdk\nimport { Client } from "@modelcontextprotocol/sdk/client/index.js";\nimport { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";\n\nconst transport = new StreamableHTTPClientTransport(new URL(${JSON.stringify(`${c.origin}/mcp`)})${c.auth ? ", {\n  requestInit: { headers: { Authorization: `Bearer ${process.env.SLUICE_TOKEN}` } },\n}" : ""});\nconst client = new Client({ name: "my-app", version: "1.0.0" });\nawait client.connect(transport);\nconst result = await client.callTool({ name: ${JSON.stringify(c.flow)}, arguments: ${mcpArgs} });\nconsole.log(result.isError, result.structuredContent ?? result.content);\nawait client.close();\n`;
      break;
    }
    case "go": {
      const imports = (extra: string[]) => {
        const all = [...new Set(["encoding/json", "fmt", "net/http", ...extra, ...(c.auth ? ["os"] : [])])].sort();
        return `import (\n${all.map((p) => `\t"${p}"`).join("\n")}\n)`;
      };
      const call = `const base = ${JSON.stringify(c.origin)}\n\n// call sends a JSON request and decodes the answer.\nfunc call(method, path string, body any, out any) error {\n\tvar buf bytes.Buffer\n\tif body != nil {\n\t\tif err := json.NewEncoder(&buf).Encode(body); err != nil {\n\t\t\treturn err\n\t\t}\n\t}\n\treq, err := http.NewRequest(method, base+path, &buf)\n\tif err != nil {\n\t\treturn err\n\t}\n\treq.Header.Set("Content-Type", "application/json")\n${c.auth ? `\treq.Header.Set("Authorization", "Bearer "+os.Getenv("SLUICE_TOKEN"))\n` : ""}\tres, err := http.DefaultClient.Do(req)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer res.Body.Close()\n\tif res.StatusCode >= 300 {\n\t\treturn fmt.Errorf("%s %s: %s", method, path, res.Status)\n\t}\n\treturn json.NewDecoder(res.Body).Decode(out)\n}\n`;
      start.code = `package main\n\n${imports(["bytes", "log"])}\n\n${call}\ntype run struct {\n\tID     string          \`json:"id"\`\n\tRun    string          \`json:"run"\` // in a 202 answer\n\tStatus string          \`json:"status"\`\n\tOutput json.RawMessage \`json:"output"\`\n\tError  string          \`json:"error"\`\n}\n\nfunc main() {\n\tvar r run\n\t// Start a run and wait for it (or for a person it waits for).\n\tif err := call("POST", "${runs}?wait=60s", map[string]any{"input": json.RawMessage(${goString(input)})}, &r); err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tfor r.Status == "queued" || r.Status == "running" {\n\t\tid := r.ID\n\t\tif id == "" {\n\t\t\tid = r.Run\n\t\t}\n\t\tif err := call("GET", "${runs}/"+id+"?wait=60s", nil, &r); err != nil {\n\t\t\tlog.Fatal(err)\n\t\t}\n\t}\n\tfmt.Println(r.Status, string(r.Output))\n}\n`;
      events.code = `package main\n\n${imports(["bufio", "bytes", "log", "strings"])}\n\n${call}\nfunc main() {\n\tvar started struct{ Run string }\n\tif err := call("POST", "${runs}", map[string]any{"input": json.RawMessage(${goString(input)})}, &started); err != nil {\n\t\tlog.Fatal(err)\n\t}\n\treq, _ := http.NewRequest("GET", base+"${runs}/"+started.Run+"/events", nil)\n\treq.Header.Set("Last-Event-ID", "0-0")\n${c.auth ? `\treq.Header.Set("Authorization", "Bearer "+os.Getenv("SLUICE_TOKEN"))\n` : ""}\tres, err := http.DefaultClient.Do(req)\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tdefer res.Body.Close()\n\tsc := bufio.NewScanner(res.Body)\n\tsc.Buffer(make([]byte, 1<<20), 1<<20)\n\tfor sc.Scan() {\n\t\tline, ok := strings.CutPrefix(sc.Text(), "data: ")\n\t\tif !ok {\n\t\t\tcontinue\n\t\t}\n\t\tvar msg struct {\n\t\t\tEvent struct {\n\t\t\t\tType, Node string\n\t\t\t\tData       json.RawMessage\n\t\t\t}\n\t\t}\n\t\tif json.Unmarshal([]byte(line), &msg) != nil {\n\t\t\tcontinue\n\t\t}\n\t\tev := msg.Event\n\t\tfmt.Println(ev.Type, ev.Node, string(ev.Data))\n\t\tvar st struct{ Status string }\n\t\t_ = json.Unmarshal(ev.Data, &st)\n\t\tif ev.Type == "run" && (st.Status == "succeeded" || st.Status == "failed" || st.Status == "cancelled") {\n\t\t\treturn\n\t\t}\n\t}\n}\n`;
      webhook.code = `package main\n\nimport (\n${c.hook.enabled ? `\t"crypto/hmac"\n\t"crypto/sha256"\n\t"encoding/hex"\n` : ""}\t"encoding/json"\n\t"io"\n\t"log"\n\t"net/http"\n${c.hook.enabled ? `\t"os"\n` : ""})\n\n// A receiver for the run's result.\nfunc main() {\n\thttp.HandleFunc("POST /sluice-result", func(w http.ResponseWriter, r *http.Request) {\n\t\tbody, _ := io.ReadAll(r.Body)\n${c.hook.enabled ? `\t\tmac := hmac.New(sha256.New, []byte(os.Getenv("${secret}")))\n\t\tmac.Write(body)\n\t\tif !hmac.Equal([]byte(r.Header.Get("X-Sluice-Signature")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {\n\t\t\thttp.Error(w, "bad signature", http.StatusUnauthorized)\n\t\t\treturn\n\t\t}\n` : ""}\t\tvar result struct {\n\t\t\tRun, Status string\n\t\t\tOutput      json.RawMessage\n\t\t}\n\t\t_ = json.Unmarshal(body, &result) // deliveries repeat: deduplicate on X-Sluice-Delivery\n\t\tlog.Println(result.Run, result.Status, string(result.Output))\n\t\tw.WriteHeader(http.StatusNoContent)\n\t})\n\tlog.Fatal(http.ListenAndServe(":9000", nil))\n}\n\n// It serves plain HTTP on port 9000: start runs with\n// {"input": ..., "webhook": "http://your.service:9000/sluice-result"}\n// (behind a TLS proxy, give the proxy's https:// address instead).\n`;
      ingress.code = `package main\n\nimport (\n\t"fmt"\n\t"log"\n\t"net/http"\n\t"os"\n\t"strings"\n)\n\nfunc main() {\n\treq, _ := http.NewRequest("POST", ${JSON.stringify(`${c.origin}/hooks/${c.flow}`)}, strings.NewReader(${goString(input)}))\n\treq.Header.Set("Content-Type", "application/json")\n\treq.Header.Set("Authorization", "Bearer "+os.Getenv("${secret}"))\n\treq.Header.Set("Idempotency-Key", "event-123")\n\tres, err := http.DefaultClient.Do(req)\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tdefer res.Body.Close()\n\tfmt.Println(res.Status)\n}\n`;
      chat.code = `package main\n\n// go get github.com/openai/openai-go/v3\nimport (\n\t"context"\n\t"fmt"\n\t"log"\n${c.auth ? `\t"os"\n` : ""}\n\t"github.com/openai/openai-go/v3"\n\t"github.com/openai/openai-go/v3/option"\n)\n\nfunc main() {\n\tclient := openai.NewClient(option.WithBaseURL(${JSON.stringify(`${c.origin}/v1/`)}), option.WithAPIKey(${c.auth ? `os.Getenv("SLUICE_TOKEN")` : `"unused"`}))\n\treply, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{\n\t\tModel:    ${JSON.stringify(c.flow)},\n\t\tMessages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},\n\t})\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tfmt.Println(reply.Choices[0].Message.Content)\n\t// client.Chat.Completions.NewStreaming streams the run's tokens.\n}\n`;
      mcp.code = `package main\n\n// go get github.com/modelcontextprotocol/go-sdk\nimport (\n\t"context"\n\t"encoding/json"\n\t"fmt"\n\t"log"\n\t"net/http"\n${c.auth ? `\t"os"\n` : ""}\n\t"github.com/modelcontextprotocol/go-sdk/mcp"\n)\n${c.auth ? `\n// bearer adds the server's token to every request.\ntype bearer struct{}\n\nfunc (bearer) RoundTrip(r *http.Request) (*http.Response, error) {\n\tr = r.Clone(r.Context())\n\tr.Header.Set("Authorization", "Bearer "+os.Getenv("SLUICE_TOKEN"))\n\treturn http.DefaultTransport.RoundTrip(r)\n}\n` : ""}\nfunc main() {\n\tctx := context.Background()\n\tclient := mcp.NewClient(&mcp.Implementation{Name: "my-app", Version: "v1.0.0"}, nil)\n\tsession, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ${JSON.stringify(`${c.origin}/mcp`)}, HTTPClient: &http.Client{${c.auth ? "Transport: bearer{}" : ""}}}, nil)\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tdefer session.Close()\n\tres, err := session.CallTool(ctx, &mcp.CallToolParams{Name: ${JSON.stringify(c.flow)}, Arguments: json.RawMessage(${goString(mcpArgs)})})\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tout, _ := json.Marshal(res.StructuredContent)\n\tfmt.Println(res.IsError, string(out))\n}\n`;
      break;
    }
  }
  return [start, events, webhook, ingress, ...(c.chat ? [chat] : []), ...(c.mcp ? [mcp] : [])];
}

/** A JSON value written as a Python literal. */
export function pyValue(v: unknown): string {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number" || typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyValue).join(", ")}]`;
  return `{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `${JSON.stringify(k)}: ${pyValue(x)}`)
    .join(", ")}}`;
}

/** A string as a Go literal: a raw string unless it holds a backquote. */
export function goString(s: string): string {
  return s.includes("`") ? JSON.stringify(s) : `\`${s}\``;
}
