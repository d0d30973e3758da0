import { describe, expect, it } from "vitest";
import { formatTime } from "./time";

describe("formatTime", () => {
  it("writes a local time in one fixed format", () => {
    const d = new Date(2026, 0, 2, 3, 4, 5);
    expect(formatTime(d)).toBe("2026-01-02 03:04:05");
    expect(formatTime(d.toISOString())).toBe("2026-01-02 03:04:05");
  });
  it("writes nothing for a time it cannot read", () => {
    expect(formatTime("nope")).toBe("");
    expect(formatTime("0001-01-01T00:00:00Z")).toBe("");
  });
});
