// The flow's settings the inspector edits with their own controls: whether the flow is
// offered as an MCP tool (settings.mcp) and its budget (settings.budget). Every other
// setting stays in the raw settings JSON. Nothing here knows about React.
import type { FlowDocument, JSONSchema } from "./types";

export type BudgetKey = "run_tokens" | "run_usd" | "day_tokens" | "day_usd";

/** The budget's caps, in the order the inspector shows them (flows/document.schema.json). */
export const BUDGET_FIELDS: { key: BudgetKey; label: string; schema: JSONSchema }[] = [
  { key: "run_tokens", label: "Tokens per run", schema: { type: "integer", minimum: 0, description: "Most tokens (input and output) one run may spend." } },
  { key: "run_usd", label: "Dollars per run", schema: { type: "number", minimum: 0, description: "Most US dollars one run may spend (needs prices in the providers file)." } },
  { key: "day_tokens", label: "Tokens per day", schema: { type: "integer", minimum: 0, description: "Most tokens all runs of the flow may spend per UTC day." } },
  { key: "day_usd", label: "Dollars per day", schema: { type: "number", minimum: 0, description: "Most US dollars all runs of the flow may spend per UTC day." } },
];

function settingsOf(doc: FlowDocument): Record<string, unknown> {
  return doc.settings && typeof doc.settings === "object" ? doc.settings : {};
}

/** The document with settings[key] set, or taken out when value is undefined (and settings with it when empty). */
export function withSetting(doc: FlowDocument, key: string, value: unknown): FlowDocument {
  const settings = { ...settingsOf(doc) };
  if (value === undefined) delete settings[key];
  else settings[key] = value;
  const next: FlowDocument = { ...doc, settings };
  if (Object.keys(settings).length === 0) delete next.settings;
  return next;
}

/** Whether the flow is offered as a tool to MCP clients. */
export function offeredOverMCP(doc: FlowDocument): boolean {
  return settingsOf(doc).mcp === true;
}

/** The document offered over MCP or not; not offered is the default, so it is written as no setting. */
export function withMCP(doc: FlowDocument, on: boolean): FlowDocument {
  return withSetting(doc, "mcp", on ? true : undefined);
}

/** The budget's caps as written (an absent cap is undefined). */
export function budgetOf(doc: FlowDocument): Partial<Record<BudgetKey, unknown>> {
  const b = settingsOf(doc).budget;
  return b && typeof b === "object" && !Array.isArray(b) ? (b as Partial<Record<BudgetKey, unknown>>) : {};
}

/** The document with one cap of the budget set, or taken out when undefined (and the budget with it when empty). */
export function withBudget(doc: FlowDocument, key: BudgetKey, value: number | undefined): FlowDocument {
  const budget: Record<string, unknown> = { ...budgetOf(doc) };
  if (value === undefined) delete budget[key];
  else budget[key] = value;
  return withSetting(doc, "budget", Object.keys(budget).length ? budget : undefined);
}
