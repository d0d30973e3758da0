// The chat playground's logic: whether a flow takes a conversation, the input of the
// next turn, and the reply in a run's output.
import type { FlowDocument, JSONSchema } from "./types";

export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
  /** The run that answered (assistant messages). */
  run?: string;
  /** The run failed: content is its error. */
  failed?: boolean;
}

/**
 * Whether the flow takes a conversation: its input node's schema has a "messages" array
 * (of {role, content}). Else why not, for the panel to say.
 */
export function chatSupport(doc: FlowDocument): { ok: true } | { ok: false; why: string } {
  const input = doc.nodes.find((n) => n.type === "input");
  if (!input) return { ok: false, why: "This flow has no Input node yet." };
  const schema = input.params?.schema as JSONSchema | undefined;
  const messages = schema?.properties?.messages;
  const type = messages?.type;
  if (!messages || !(type === "array" || (Array.isArray(type) && type.includes("array")))) {
    return { ok: false, why: 'Its input does not take a conversation: give the Input node a schema with a "messages" array of {role, content} (the Chat assistant example does).' };
  }
  return { ok: true };
}

/**
 * Whether the flow's input takes a session_id: its schema names one, or lets any field in.
 * A flow that remembers the conversation (a memory node keyed by {{.session_id}}) gets the
 * playground's session with every turn, so the conversation continues across runs.
 */
export function takesSession(doc: FlowDocument): boolean {
  const schema = doc.nodes.find((n) => n.type === "input")?.params?.schema as JSONSchema | undefined;
  if (!schema) return true;
  return !!schema.properties?.session_id || (schema as { additionalProperties?: unknown }).additionalProperties !== false;
}

/** The next turn's input: the conversation so far (without failed turns), the new message, and the session when given. */
export function turnInput(history: ChatMessage[], text: string, session?: string): { messages: { role: string; content: string }[]; session_id?: string } {
  const input: { messages: { role: string; content: string }[]; session_id?: string } = {
    messages: [...history.filter((m) => !m.failed).map((m) => ({ role: m.role, content: m.content })), { role: "user", content: text }],
  };
  if (session) input.session_id = session;
  return input;
}

/** A new conversation's session id. */
export function newSession(): string {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === "function") return c.randomUUID();
  return `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

export function sessionKey(flow: string): string {
  return `sluice:chat-session:${flow}`;
}

/** The reply in a run's output: text, or the first text field of an object (reply, answer, content, message, text). */
export function replyOf(output: unknown): string {
  if (typeof output === "string") return output;
  if (output && typeof output === "object" && !Array.isArray(output)) {
    const o = output as Record<string, unknown>;
    for (const k of ["reply", "answer", "content", "message", "text", "output"]) if (typeof o[k] === "string") return o[k] as string;
  }
  return output === undefined || output === null ? "" : JSON.stringify(output, null, 2);
}

export function chatKey(flow: string): string {
  return `sluice:chat:${flow}`;
}

export function parseChat(text: string | null): ChatMessage[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? (v.filter((m) => m && typeof m === "object" && (m.role === "user" || m.role === "assistant") && typeof m.content === "string") as ChatMessage[]) : [];
  } catch {
    return [];
  }
}
