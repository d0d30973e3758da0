// Connection rules: which port may connect to which, and why not. The editor refuses a
// connection these rules refuse and says the reason; the server's validation checks the
// same rules again (port_type_mismatch, unknown_port, duplicate_edge).
import { fromPort, toPort } from "./edges";
import { findPort, portNames, portsOf } from "./ports";
import type { FlowDocument, Registry } from "./types";

export interface Connection {
  from: string;
  port: string;
  to: string;
  to_port: string;
}

export type Verdict = { ok: true } | { ok: false; reason: string };

const refuse = (reason: string): Verdict => ({ ok: false, reason });

export function checkConnection(doc: FlowDocument, reg: Registry, c: Connection): Verdict {
  const from = doc.nodes.find((n) => n.id === c.from);
  const to = doc.nodes.find((n) => n.id === c.to);
  if (!from || !to) return refuse("both ends of a connection must be nodes of this flow");
  const fromSpec = reg.get(from.type);
  const toSpec = reg.get(to.type);
  if (!fromSpec) return refuse(`"${from.id}" has an unknown type "${from.type}"`);
  if (!toSpec) return refuse(`"${to.id}" has an unknown type "${to.type}"`);
  if (from.id === to.id) return refuse("a node cannot connect to itself");
  const out = findPort(portsOf(from, fromSpec), c.port, "out");
  if (!out) {
    return refuse(`${fromSpec.title} "${from.id}" has no output port "${c.port}"; it has ${list(portNames(portsOf(from, fromSpec), "out"))}`);
  }
  const inp = findPort(portsOf(to, toSpec), c.to_port, "in");
  if (!inp) {
    return refuse(`${toSpec.title} "${to.id}" has no input port "${c.to_port}"; it has ${list(portNames(portsOf(to, toSpec), "in"))}`);
  }
  if (out.type !== inp.type) {
    return refuse(
      `a ${out.type} port cannot connect to a ${inp.type} port: "${from.id}".${out.name} carries ${describe(out.type)}, ` +
        `"${to.id}".${inp.name} takes ${describe(inp.type)}`,
    );
  }
  const existing = doc.edges.filter((e) => e.to === to.id && toPort(e) === inp.name);
  if (existing.some((e) => e.from === from.id && fromPort(e) === out.name)) {
    return refuse(`"${from.id}".${out.name} is already connected to "${to.id}".${inp.name}`);
  }
  if (!inp.multiple && existing.length > 0) {
    return refuse(`input port "${inp.name}" of "${to.id}" takes one edge and already has one from "${existing[0]!.from}"`);
  }
  return { ok: true };
}

function describe(t: string): string {
  return t === "tool" ? "a tool for an agent" : "the run state";
}

function list(names: string[]): string {
  return names.length === 0 ? "none" : names.map((n) => `"${n}"`).join(", ");
}
