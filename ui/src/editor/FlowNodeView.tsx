// The one node component: it draws any component type from its spec — ports as typed
// handles, a summary of its parameters, its problems, and the test run's status.
import { Handle, Position, type NodeProps } from "@xyflow/react";
import { memo } from "react";
import type { CanvasNode } from "../flow/canvas";
import { worst } from "../flow/problems";
import { formatDuration } from "../flow/runview";
import { fieldsOf } from "../flow/schema";
import type { PortSpec } from "../flow/types";

const STATUS_TEXT = { queued: "queued", running: "running", done: "done", failed: "failed", waiting: "waiting" } as const;

function side(p: PortSpec): Position {
  if (p.type === "tool") return p.direction === "in" ? Position.Bottom : Position.Top;
  return p.direction === "in" ? Position.Left : Position.Right;
}

function summary(node: CanvasNode["data"]): string | undefined {
  const fields = fieldsOf(node.spec?.params);
  for (const f of fields) {
    const v = node.node.params?.[f.name];
    if (v === undefined) continue;
    if (typeof v === "string") return `${f.name}: ${v}`;
    if (f.kind === "routes" && v && typeof v === "object") return `routes: ${Object.keys(v).join(", ")}`;
  }
  return undefined;
}

function FlowNodeViewInner({ data, selected }: NodeProps<CanvasNode>) {
  const { node, spec, ports, problems, run, queue } = data;
  const diffMark = data.mark;
  const mark = worst(problems);
  const groups = new Map<Position, PortSpec[]>();
  for (const p of ports) {
    const s = side(p);
    groups.set(s, [...(groups.get(s) ?? []), p]);
  }
  const sum = summary(data);
  const classes = ["flow-node", `cat-${spec?.category ?? "unknown"}`, mark ? `has-${mark}` : "", run ? `run-${run.status}` : "", selected ? "selected" : "", diffMark ? `diff-${diffMark}` : "", data.pinned ? "has-pin" : "", data.outputChanged ? "output-changed" : ""];
  return (
    <div className={classes.filter(Boolean).join(" ")} data-node={node.id} data-pinned={data.pinned ? "true" : undefined} data-status={run?.status ?? ""} data-mark={diffMark ?? ""} data-output-changed={data.outputChanged ? "true" : undefined} title={spec?.description ?? node.description}>
      {diffMark && <span className={`diff-badge mark-${diffMark}`}>{diffMark}</span>}
      {data.outputChanged && (
        <span className="diff-badge mark-changed output-changed-badge" title="In the test case shown (Tests tab), this node's output differs from the run the case was saved from">
          output changed
        </span>
      )}
      {data.pinned && (
        <span className="pin-badge" title="Pinned: test runs from this editor give back its pinned output instead of running it (see the Test run tab)">
          <svg viewBox="0 0 12 12" width="10" height="10" aria-hidden="true">
            <circle cx="6" cy="4" r="3" fill="currentColor" />
            <path d="M6 7v5" stroke="currentColor" strokeWidth="1.6" strokeLinecap="round" />
          </svg>
          pinned
        </span>
      )}
      <div className="flow-node-head">
        <span className="flow-node-title">{node.label || node.id}</span>
        <span className="flow-node-type">{spec?.title ?? node.type}</span>
      </div>
      {node.label && <div className="flow-node-id">{node.id}</div>}
      {sum && <div className="flow-node-summary">{sum.length > 60 ? sum.slice(0, 59) + "…" : sum}</div>}
      {!spec && <div className="flow-node-problem">{node.type.startsWith("langflow:") ? `placeholder for Langflow’s ${node.type.slice(9)}: replace it` : `unknown type “${node.type}”`}</div>}
      {run && (
        <div className="flow-node-run">
          <span className={`run-chip status-${run.status}`}>{STATUS_TEXT[run.status]}</span>
          {run.pinned && (
            <span className="run-chip run-pinned" title="this step did not run: it gave back its pinned output">
              pinned
            </span>
          )}
          {run.movedTo && (
            <span className="run-chip run-moved" title={`the run moved to version ${run.movedTo} here (a retry on another version)`}>
              moved to {run.movedTo.slice(0, 7)}
            </span>
          )}
          {run.durationMs !== undefined && <span className="muted">{formatDuration(run.durationMs)}</span>}
          {run.steps > 1 && <span className="muted">×{run.steps}</span>}
          {run.calls !== undefined && <span className="muted">called {run.calls}×</span>}
          {run.noWorker && (
            <span className="badge badge-warning" title="no live worker reads this node's stream: start one with sluice worker">
              no worker
            </span>
          )}
          {run.tokens.input_tokens + run.tokens.output_tokens > 0 && (
            <span className="muted" title="input / output tokens">
              {run.tokens.input_tokens}/{run.tokens.output_tokens} tok
            </span>
          )}
        </div>
      )}
      {/* One line each, the latest of the text and the error in full in the Test run tab:
          a run makes a node taller by RUN_ROOM at most (flow/layout.ts), so it never grows
          over the node below. */}
      {run?.error ? (
        <div className="flow-node-problem flow-node-error" title={run.error}>
          {run.error}
        </div>
      ) : (
        run?.text && (
          <div className="flow-node-stream" title={run.text.length > 400 ? "…" + run.text.slice(-400) : run.text}>
            <span>{run.text.length > 160 ? "…" + run.text.slice(-160) : run.text}</span>
          </div>
        )
      )}
      {(mark || (queue && (queue.pending + queue.lag > 0 || queue.dead > 0))) && (
        <div className="flow-node-badges">
          {mark && (
            <span className={`badge badge-${mark}`} title={problems.map((p) => p.message).join("\n")}>
              {problems.length} {problems.length === 1 ? "problem" : "problems"}
            </span>
          )}
          {queue && queue.pending + queue.lag > 0 && (
            <span className="badge badge-queue" title={`${queue.lag} waiting to be read, ${queue.pending} being worked on`}>
              {queue.pending + queue.lag} in stream
            </span>
          )}
          {queue && queue.dead > 0 && (
            <span className="badge badge-error" title="dead letters: see the Queues page">
              {queue.dead} dead
            </span>
          )}
        </div>
      )}
      {[...groups.entries()].map(([pos, list]) =>
        list.map((p, i) => {
          const along = `${((i + 1) * 100) / (list.length + 1)}%`;
          const style = pos === Position.Left || pos === Position.Right ? { top: along } : { left: along };
          const labelled = list.length > 1 || (p.name !== "in" && p.name !== "out");
          return (
            <Handle
              key={`${p.direction}:${p.name}`}
              id={p.name}
              type={p.direction === "in" ? "target" : "source"}
              position={pos}
              style={style}
              className={`port port-${p.type}${p.required ? " port-required" : ""}`}
              title={`${p.direction === "in" ? "input" : "output"} port “${p.name}” (${p.type})${p.description ? ": " + p.description : ""}`}
              data-port={p.name}
            >
              {labelled && <span className={`port-label port-label-${pos}`}>{p.name}</span>}
            </Handle>
          );
        }),
      )}
    </div>
  );
}

export const FlowNodeView = memo(FlowNodeViewInner);
