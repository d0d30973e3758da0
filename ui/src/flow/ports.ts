// The ports a node has: its component's ports plus, for components with route ports
// (a router's routes), one out port per route written in its params.
import { fromPort, toPort } from "./edges";
import type { ComponentSpec, Direction, FlowDocument, FlowNode, PortSpec } from "./types";

export function portsOf(node: FlowNode, spec: ComponentSpec | undefined): PortSpec[] {
  if (!spec) return [];
  const ports = [...spec.ports];
  if (spec.route_ports) {
    const routes = node.params?.[spec.route_ports];
    const names = Array.isArray(routes)
      ? routes.filter((r): r is string => typeof r === "string")
      : routes && typeof routes === "object"
        ? Object.keys(routes as object)
        : [];
    const type = spec.ports.find((p) => p.direction === "out")?.type ?? "state";
    for (const name of names) {
      if (!ports.some((p) => p.direction === "out" && p.name === name)) {
        ports.push({ name, direction: "out", type, description: `route "${name}"` });
      }
    }
  }
  return ports;
}

export function findPort(ports: PortSpec[], name: string, dir: Direction): PortSpec | undefined {
  return ports.find((p) => p.name === name && p.direction === dir);
}

export function portNames(ports: PortSpec[], dir: Direction): string[] {
  return ports.filter((p) => p.direction === dir).map((p) => p.name);
}

/**
 * The ports a node of an unknown type needs for its edges to show: one per port its edges
 * name. An import's placeholder (type "langflow:…") stays wired on the canvas until a
 * person replaces it.
 */
export function portsFromEdges(id: string, doc: FlowDocument): PortSpec[] {
  const ports: PortSpec[] = [];
  const add = (name: string, direction: Direction) => {
    if (ports.some((p) => p.name === name && p.direction === direction)) return;
    const type = name === "tool" || name === "tools" ? "tool" : "state";
    ports.push({ name, direction, type, multiple: direction === "in" });
  };
  for (const e of doc.edges) {
    if (e.to === id) add(toPort(e), "in");
    if (e.from === id) add(fromPort(e), "out");
  }
  return ports;
}
