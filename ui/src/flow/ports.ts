// The ports a node has: its component's ports plus, for components with route ports
// (a router's routes), one out port per route written in its params.
import type { ComponentSpec, Direction, FlowNode, PortSpec } from "./types";

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
