// A flow's schedules (settings.schedules) as the editor edits them, and how each one is
// matched with what the server runs: the schedules of the current version, with next
// fire times, pause and recent runs. A schedule is matched by what it does (cron, time
// zone, input), as the server keys its pauses, not by its position.
import { equal } from "./diff";
import type { FlowDocument } from "./types";

export interface Schedule {
  cron: string;
  input?: unknown;
  timezone?: string;
  enabled?: boolean;
}

/** A schedule of the current version as GET /api/flows/FLOW/schedules answers it. */
export interface SavedSchedule extends Schedule {
  index: number;
  key: string;
  enabled: boolean;
  paused: boolean;
  paused_at?: string;
  last_tick?: string;
  next: string[];
  runs: { id: string; status: string; tick?: string; created_at: string }[];
}

export function schedulesOf(doc: FlowDocument): Schedule[] {
  const s = doc.settings?.["schedules"];
  return Array.isArray(s) ? (s as Schedule[]) : [];
}

function withSchedules(doc: FlowDocument, list: Schedule[]): FlowDocument {
  const settings = { ...(doc.settings ?? {}) };
  if (list.length) settings["schedules"] = list;
  else delete settings["schedules"];
  const { settings: _old, ...rest } = doc;
  return Object.keys(settings).length === 0 ? rest : { ...rest, settings };
}

export function addSchedule(doc: FlowDocument, s: Schedule = { cron: "0 9 * * 1-5" }): FlowDocument {
  return withSchedules(doc, [...schedulesOf(doc), s]);
}

export function updateSchedule(doc: FlowDocument, i: number, patch: Partial<Schedule>): FlowDocument {
  const list = schedulesOf(doc).map((s, j) => {
    if (j !== i) return s;
    const next: Schedule = { ...s, ...patch };
    if (!next.timezone) delete next.timezone;
    if (next.enabled !== false) delete next.enabled;
    if (next.input === undefined) delete next.input;
    return next;
  });
  return withSchedules(doc, list);
}

export function removeSchedule(doc: FlowDocument, i: number): FlowDocument {
  return withSchedules(
    doc,
    schedulesOf(doc).filter((_, j) => j !== i),
  );
}

/** Whether a schedule of the document is one the server runs (same cron, zone, input). */
export function sameSchedule(a: Schedule, b: Schedule): boolean {
  return a.cron.trim() === b.cron.trim() && (a.timezone ?? "") === (b.timezone ?? "") && equal(a.input ?? {}, b.input ?? {});
}

/** The saved schedule that a schedule of the document is, if any. */
export function savedFor(s: Schedule, saved: SavedSchedule[]): SavedSchedule | undefined {
  return saved.find((x) => sameSchedule(s, x));
}

/** "in 5 min", "in 3 h", "in 2 days": how far off a time is. */
export function fromNow(t: string | Date, now: Date = new Date()): string {
  const ms = new Date(t).getTime() - now.getTime();
  const ahead = ms >= 0;
  const a = Math.abs(ms);
  const s = a < 60_000 ? `${Math.round(a / 1000)} s` : a < 3_600_000 ? `${Math.round(a / 60_000)} min` : a < 172_800_000 ? `${Math.round(a / 3_600_000)} h` : `${Math.round(a / 86_400_000)} days`;
  return ahead ? `in ${s}` : `${s} ago`;
}

/**
 * A time as the schedule's own zone reads it, named with the zone ("Mon, Jan 6, 06:00
 * Europe/Paris"); a schedule without a zone is read in UTC, as the server reads it.
 */
export function inZone(t: string | Date, timezone?: string, locale?: string): string {
  const zone = timezone || "UTC";
  const d = new Date(t);
  try {
    const f = new Intl.DateTimeFormat(locale, { timeZone: zone, weekday: "short", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
    return `${f.format(d)} ${zone}`;
  } catch {
    // A zone this browser does not know: the server checked it, so say it in UTC.
    return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
  }
}
