// Times as every page shows them: the browser's local time, one format, so a list
// rendered by the server and updated live reads the same.

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** "2026-01-02 15:04:05" in the browser's time zone; "" for a time it cannot read. */
export function formatTime(t: string | number | Date): string {
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return "";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
