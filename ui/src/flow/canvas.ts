// Flow document <-> React Flow: the canvas's nodes and edges are derived from the
// document plus what overlays it (problems, the test run, queue figures, selection).
// Edits on the canvas come back as document edits (ops.ts); this module only converts.
import type { Connection as RFConnection, Edge, Node } from "@xyflow/react";
import type { Connection } from "./connect";
import { canvasEdgeIds, fromPort, toPort } from "./edges";
import { portsFromEdges, portsOf } from "./ports";
import type { ProblemMap } from "./problems";
import type { NodeRun } from "./runview";
import type { ComponentSpec, FlowDocument, FlowEdge, FlowNode, PortSpec, Problem, Registry } from "./types";
import type { Size } from "./layout";
import type { Mark } from "./versions";

/** What the canvas knows about a node's stream: entries waiting and dead letters. */
export interface QueueBadge {
  pending: number;
  lag: number;
  dead: number;
}

export type NodeData = {
  node: FlowNode;
  spec: ComponentSpec | undefined;
  ports: PortSpec[];
  problems: Problem[];
  run: NodeRun | undefined;
  queue: QueueBadge | undefined;
  /** In a comparison of two versions: whether the node was added, removed or changed. */
  mark?: Mark | undefined;
  /** In the Tests tab's case shown: the node's output changed from the run the case was saved from. */
  outputChanged?: boolean;
  /** Test runs from this editor give back its pinned output instead of running it (pins.ts). */
  pinned?: boolean;
};

export type EdgeData = {
  edge: FlowEdge;
  problems: Problem[];
};

export type CanvasNode = Node<NodeData, "flow">;
export type CanvasEdge = Edge<EdgeData>;

export interface Overlay {
  problems?: ProblemMap;
  run?: Record<string, NodeRun>;
  queues?: Map<string, QueueBadge>;
  selectedNodes?: Set<string>;
  selectedEdges?: Set<string>;
  sizes?: Map<string, Size>;
  /** A comparison of two versions (versions.ts). */
  marks?: { nodes: Map<string, Mark>; edges: Map<string, Mark> };
  /** The nodes whose output changed in the test case shown (flow/tests.ts). */
  changed?: Set<string>;
  /** The nodes whose pins the next test run uses (pins.ts). */
  pins?: ReadonlySet<string>;
}

export function toCanvasNodes(doc: FlowDocument, reg: Registry, o: Overlay = {}): CanvasNode[] {
  return doc.nodes.map((n, i) => {
    const spec = reg.get(n.type);
    const cn: CanvasNode = {
      id: n.id,
      type: "flow",
      position: n.position ?? { x: i * 240, y: 0 },
      selected: o.selectedNodes?.has(n.id) ?? false,
      data: {
        node: n,
        spec,
        ports: spec ? portsOf(n, spec) : portsFromEdges(n.id, doc),
        mark: o.marks?.nodes.get(n.id),
        problems: o.problems?.byNode.get(n.id) ?? [],
        run: o.run?.[n.id],
        queue: o.queues?.get(n.id),
      },
    };
    if (o.pins?.has(n.id)) cn.data.pinned = true;
    if (o.changed?.has(n.id)) cn.data.outputChanged = true;
    const size = o.sizes?.get(n.id);
    if (size) cn.measured = { width: size.width, height: size.height };
    return cn;
  });
}

export function toCanvasEdges(doc: FlowDocument, o: Overlay = {}): CanvasEdge[] {
  const ids = canvasEdgeIds(doc.edges);
  return doc.edges.map((e, i) => {
    const id = ids[i]!;
    const problems = o.problems?.byEdge.get(id) ?? [];
    const running = o.run?.[e.to]?.status === "running" || o.run?.[e.to]?.status === "queued";
    const ce: CanvasEdge = {
      id,
      source: e.from,
      sourceHandle: fromPort(e),
      target: e.to,
      targetHandle: toPort(e),
      selected: o.selectedEdges?.has(id) ?? false,
      data: { edge: e, problems },
      animated: !!o.run && running && o.run[e.from]?.status === "done",
      className: [
        problems.some((p) => p.severity === "error") ? "edge-error" : problems.length ? "edge-warning" : "",
        e.condition ? "edge-conditional" : "",
        o.marks?.edges.has(id) ? `edge-${o.marks.edges.get(id)}` : "",
      ]
        .filter(Boolean)
        .join(" "),
      ariaLabel: `edge from ${e.from}.${fromPort(e)} to ${e.to}.${toPort(e)}`,
    };
    if (e.condition) ce.label = e.condition;
    return ce;
  });
}

/** A connection drawn on the canvas as the document names it. */
export function connectionOf(c: RFConnection): Connection {
  return { from: c.source, port: c.sourceHandle ?? "out", to: c.target, to_port: c.targetHandle ?? "in" };
}
