// Every validation problem of the flow; choosing one selects what it is about.
import type { ProblemMap } from "../flow/problems";
import type { Problem } from "../flow/types";

interface Props {
  problems: Problem[];
  map: ProblemMap;
  checking: boolean;
  error?: string | undefined;
  onShow: (target: { node?: string; edge?: string }) => void;
}

export function ProblemsPanel({ problems, map, checking, error, onShow }: Props) {
  const edgeOf = (p: Problem) => [...map.byEdge.entries()].find(([, list]) => list.includes(p))?.[0];
  return (
    <div className="problems-panel" aria-live="polite">
      <p className="muted small">
        {checking ? "Checking…" : problems.length === 0 ? "No problems: the flow is valid." : `${map.errors} ${map.errors === 1 ? "error" : "errors"}, ${map.warnings} ${map.warnings === 1 ? "warning" : "warnings"}.`}
      </p>
      {error && <p className="error">Could not check the flow: {error}</p>}
      <ul className="problem-list">
        {problems.map((p, i) => {
          const edge = edgeOf(p);
          const node = p.node && map.byNode.has(p.node) ? p.node : undefined;
          const where = node ? `node ${node}` : edge ? `edge ${edge}` : "flow";
          return (
            <li key={i} className={`problem ${p.severity}`} data-code={p.code}>
              <button type="button" className="link" disabled={!node && !edge} onClick={() => onShow(node ? { node } : { edge: edge! })}>
                <span className="problem-where">{where}</span>
                {p.path && <code className="problem-path">{p.path}</code>}
              </button>
              <span className="problem-message">{p.message}</span>
              <span className="problem-code muted">{p.code}</span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
