// Validates the document on the server as it is edited: one POST /api/flows/validate a
// moment after the last change; answers to older documents are dropped.
import { useEffect, useRef, useState } from "react";
import { api, ApiError } from "../api/client";
import type { FlowDocument, Problem } from "../flow/types";

export interface ValidationState {
  problems: Problem[];
  checking: boolean;
  /** The document the problems belong to. */
  checked: FlowDocument | undefined;
  error?: string;
}

/** The document without layout (node positions, notes): moving a node or editing a note changes nothing validation sees. */
function structure(doc: FlowDocument): string {
  const { notes: _, ...rest } = doc;
  return JSON.stringify({ ...rest, nodes: doc.nodes.map(({ position: _, ...n }) => n) });
}

export function useValidation(doc: FlowDocument, delayMs = 300): ValidationState {
  const [state, setState] = useState<ValidationState>({ problems: [], checking: true, checked: undefined });
  const seq = useRef(0);
  const latest = useRef(doc);
  latest.current = doc;
  const key = structure(doc);
  useEffect(() => {
    const doc = latest.current;
    const n = ++seq.current;
    setState((s) => ({ ...s, checking: true }));
    const t = setTimeout(() => {
      api
        .validate(doc)
        .then((v) => {
          if (n === seq.current) setState({ problems: v.problems, checking: false, checked: doc });
        })
        .catch((e: unknown) => {
          if (n === seq.current) setState((s) => ({ ...s, checking: false, error: e instanceof ApiError ? e.message : String(e) }));
        });
    }, delayMs);
    return () => clearTimeout(t);
  }, [key, delayMs]);
  return state;
}
