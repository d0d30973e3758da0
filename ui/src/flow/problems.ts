// Validation problems mapped onto what the editor shows: each node's and edge's
// problems, the parameter a problem is about, and the problems that belong to no item.
import { canvasEdgeIds, edgeKey } from "./edges";
import type { FlowDocument, Problem } from "./types";

export interface ProblemMap {
  byNode: Map<string, Problem[]>;
  /** By canvas edge id. */
  byEdge: Map<string, Problem[]>;
  /** Problems of the flow as a whole (no input node, a bad flow id...). */
  general: Problem[];
  errors: number;
  warnings: number;
}

const NODE_PATH = /^nodes\[(\d+)\]/;
const EDGE_PATH = /^edges\[(\d+)\]/;

export function mapProblems(problems: Problem[], doc: FlowDocument): ProblemMap {
  const m: ProblemMap = { byNode: new Map(), byEdge: new Map(), general: [], errors: 0, warnings: 0 };
  const ids = canvasEdgeIds(doc.edges);
  const add = <K>(map: Map<K, Problem[]>, k: K, p: Problem) => {
    const list = map.get(k);
    if (list) list.push(p);
    else map.set(k, [p]);
  };
  for (const p of problems) {
    if (p.severity === "error") m.errors++;
    else m.warnings++;
    let placed = false;
    if (p.edge) {
      doc.edges.forEach((e, i) => {
        if (edgeKey(e) === p.edge) {
          add(m.byEdge, ids[i]!, p);
          placed = true;
        }
      });
    } else if (p.path && EDGE_PATH.test(p.path)) {
      const i = Number(EDGE_PATH.exec(p.path)![1]);
      if (i < doc.edges.length) {
        add(m.byEdge, ids[i]!, p);
        placed = true;
      }
    }
    let node = p.node;
    if (!node && p.path && NODE_PATH.test(p.path)) {
      node = doc.nodes[Number(NODE_PATH.exec(p.path)![1])]?.id;
    }
    if (node && doc.nodes.some((n) => n.id === node)) {
      add(m.byNode, node, p);
      placed = true;
    }
    if (!placed) m.general.push(p);
  }
  return m;
}

/**
 * The field of a node a problem is about: "params.expr" -> {param: "expr"}, "input" ->
 * {field: "input"}. Paths look like nodes[2].params.expr or nodes[2].input.
 */
export function problemField(p: Problem): { param?: string; field?: string } {
  if (!p.path) return {};
  const rest = p.path.replace(NODE_PATH, "").replace(/^\./, "");
  if (rest === "") return {};
  const param = /^params\.([A-Za-z0-9_$-]+)/.exec(rest);
  if (param) return { param: param[1] };
  if (rest === "params") return { field: "params" };
  const field = /^([a-z_]+)/.exec(rest);
  return field ? { field: field[1] } : {};
}

/** The worst severity in a list, for a node's or edge's marker. */
export function worst(problems: Problem[] | undefined): "error" | "warning" | undefined {
  if (!problems || problems.length === 0) return undefined;
  return problems.some((p) => p.severity === "error") ? "error" : "warning";
}
