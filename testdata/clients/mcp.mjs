// The MCP TypeScript SDK against Sluice: over stdio (`sluice mcp`, the binary in
// SLUICE_BIN serving SLUICE_FLOWS) and Streamable HTTP (SLUICE_URL/mcp with the token):
// list the tools and call MCP_TOOL with {"name": "Ada"}. Prints one JSON object per
// transport.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { SLUICE_URL, SLUICE_TOKEN, SLUICE_BIN, SLUICE_FLOWS, MCP_TOOL } = process.env;

async function session(name, transport) {
  const client = new Client({ name: "clients-test", version: "1" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const res = await client.callTool({ name: MCP_TOOL, arguments: { name: "Ada" } });
  await client.close();
  console.log(JSON.stringify({ transport: name, tools: tools.map((t) => t.name), isError: !!res.isError, text: res.content?.[0]?.text ?? null }));
}

await session("stdio", new StdioClientTransport({ command: SLUICE_BIN, args: ["mcp", "--flows", SLUICE_FLOWS], env: { ...process.env, REDIS_URL: "" } }));
await session("http", new StreamableHTTPClientTransport(new URL(SLUICE_URL + "/mcp"), { requestInit: { headers: { Authorization: "Bearer " + SLUICE_TOKEN } } }));
