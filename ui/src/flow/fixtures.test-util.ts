// Components and flows the unit tests share: a few real specs (as /api/components sends
// them) plus an agent with a tools port and a tool, to test port types.
import { registryOf, type ComponentSpec, type FlowDocument } from "./types";

const inPort = { name: "in", direction: "in", type: "state", multiple: true } as const;
const outPort = { name: "out", direction: "out", type: "state" } as const;

export const specs: ComponentSpec[] = [
  { name: "input", title: "Input", category: "io", description: "", ports: [outPort], params: { type: "object", properties: { schema: { type: "object", format: "json-schema" }, example: {} } } },
  { name: "output", title: "Output", category: "io", description: "", ports: [{ name: "in", direction: "in", type: "state", required: true, multiple: true }], params: { type: "object", properties: { value: { type: "string", format: "jq", default: "." } } } },
  { name: "transform", title: "Transform", category: "data", description: "", ports: [inPort, outPort], params: { type: "object", required: ["expr"], properties: { expr: { type: "string", format: "jq" } } } },
  {
    name: "router", title: "Router", category: "flow", description: "", route_ports: "routes", routing: true,
    ports: [inPort, { name: "default", direction: "out", type: "state" }],
    params: { type: "object", required: ["routes"], properties: { routes: { type: "object", additionalProperties: { type: "string", format: "jq" } } } },
  },
  { name: "single", title: "Single", category: "data", description: "", ports: [{ name: "in", direction: "in", type: "state" }, outPort], params: { type: "object" } },
  {
    name: "agent", title: "Agent", category: "ai", description: "",
    ports: [inPort, outPort, { name: "tools", direction: "in", type: "tool", multiple: true }],
    params: { type: "object", properties: { api_key: { "x-secret": true }, model: { type: "string" }, temperature: { type: "number", minimum: 0, maximum: 2 }, stream: { type: "boolean" }, mode: { enum: ["a", "b"] }, timeout: { type: "string", format: "duration" }, prompt: { type: "string", format: "template" }, stop: { type: "array", items: { type: "string" } } } },
  },
  { name: "http", title: "HTTP", category: "tools", description: "", ports: [inPort, outPort, { name: "tool", direction: "out", type: "tool" }], params: { type: "object" } },
];

export const reg = registryOf(specs);

export function flow(nodes: [string, string][], edges: FlowDocument["edges"] = []): FlowDocument {
  return { sluice: 1, id: "t", nodes: nodes.map(([id, type], i) => ({ id, type, position: { x: i * 100, y: 0 } })), edges };
}
