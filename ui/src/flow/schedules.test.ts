import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { addSchedule, fromNow, inZone, removeSchedule, savedFor, schedulesOf, updateSchedule, type SavedSchedule } from "./schedules";

describe("schedules of a document", () => {
  it("adds, edits and removes schedules in settings, leaving the other settings alone", () => {
    let d = flow([["in", "input"]]);
    d.settings = { max_steps: 5 };
    d = addSchedule(d, { cron: "@hourly" });
    d = updateSchedule(d, 0, { timezone: "Europe/Paris", input: { a: 1 }, enabled: false });
    expect(schedulesOf(d)).toEqual([{ cron: "@hourly", timezone: "Europe/Paris", input: { a: 1 }, enabled: false }]);
    d = updateSchedule(d, 0, { timezone: "", enabled: true, input: undefined });
    expect(schedulesOf(d)).toEqual([{ cron: "@hourly" }]);
    d = removeSchedule(d, 0);
    expect(d.settings).toEqual({ max_steps: 5 });
  });
  it("drops settings that hold nothing but the schedules", () => {
    const d = removeSchedule(addSchedule(flow([["in", "input"]])), 0);
    expect(d.settings).toBeUndefined();
  });
});

describe("matching the schedules the server runs", () => {
  const saved = [{ index: 0, key: "k", cron: "@hourly", input: { b: 2, a: 1 }, enabled: true, paused: true, next: [], runs: [] }] as SavedSchedule[];
  it("finds a schedule by what it does, whatever its position or key order", () => {
    expect(savedFor({ cron: " @hourly", input: { a: 1, b: 2 } }, saved)?.key).toBe("k");
  });
  it("does not match an edited schedule", () => {
    expect(savedFor({ cron: "@hourly", input: { a: 1, b: 3 } }, saved)).toBeUndefined();
    expect(savedFor({ cron: "@hourly", input: { a: 1, b: 2 }, timezone: "UTC" }, saved)).toBeUndefined();
  });
});

describe("fromNow", () => {
  const now = new Date("2026-03-01T10:00:00Z");
  it("says how far off a time is", () => {
    expect(fromNow("2026-03-01T10:05:00Z", now)).toBe("in 5 min");
    expect(fromNow("2026-03-01T13:00:00Z", now)).toBe("in 3 h");
    expect(fromNow("2026-03-04T10:00:00Z", now)).toBe("in 3 days");
    expect(fromNow("2026-03-01T09:59:30Z", now)).toBe("30 s ago");
  });
});

describe("inZone", () => {
  it("reads a fire time in the schedule's own zone, whatever the browser's", () => {
    // 05:00 UTC in January is 06:00 in Paris and 00:00 in New York.
    expect(inZone("2026-01-05T05:00:00Z", "Europe/Paris", "en-US")).toBe("Mon, Jan 5, 06:00 Europe/Paris");
    expect(inZone("2026-01-05T05:00:00Z", "America/New_York", "en-US")).toBe("Mon, Jan 5, 00:00 America/New_York");
  });
  it("reads a schedule without a zone in UTC, as the server does", () => {
    expect(inZone("2026-01-05T05:00:00Z", undefined, "en-US")).toBe("Mon, Jan 5, 05:00 UTC");
  });
  it("falls back to UTC for a zone the browser does not know", () => {
    expect(inZone("2026-01-05T05:00:00Z", "Mars/Olympus", "en-US")).toBe("2026-01-05 05:00 UTC");
  });
});
