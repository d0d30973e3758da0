// The flow's schedules: edited in the document (they take effect when the flow is
// saved), and for each one the server runs — the current version's — its next fire
// times, pause and recent runs.
import { useCallback, useEffect, useState } from "react";
import { api, type ScheduleList } from "../api/client";
import { equal } from "../flow/diff";
import { addSchedule, fromNow, inZone, removeSchedule, savedFor, schedulesOf, updateSchedule, type SavedSchedule, type Schedule } from "../flow/schedules";
import type { FlowDocument, Problem } from "../flow/types";
import type { EditorStore } from "./store";

interface Props {
  store: EditorStore;
  doc: FlowDocument;
  isNew: boolean;
  savedAt: number;
  problems: Problem[];
  say: (text: string, kind?: "ok" | "error") => void;
}

export function SchedulesPanel({ store, doc, isNew, savedAt, problems, say }: Props) {
  const [list, setList] = useState<ScheduleList | undefined>();
  const load = useCallback(() => {
    if (isNew) return;
    api.schedules(doc.id).then(setList, () => setList(undefined));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [doc.id, isNew]);
  useEffect(load, [load, savedAt]);
  useEffect(() => {
    if (isNew) return;
    const t = setInterval(load, 15_000);
    return () => clearInterval(t);
  }, [load, isNew]);

  const scheds = schedulesOf(doc);
  const saved = list?.schedules ?? [];
  const edit = (i: number, patch: Partial<Schedule>) => store.edit((d) => updateSchedule(d, i, patch), `schedule.${i}.${Object.keys(patch)[0]}`);
  const toggle = async (s: SavedSchedule) => {
    try {
      const v = s.paused ? await api.resumeSchedule(doc.id, s.index) : await api.pauseSchedule(doc.id, s.index);
      say(v.paused ? `Schedule “${s.cron}” paused` : `Schedule “${s.cron}” resumed`);
      load();
    } catch (e) {
      say(`Not changed: ${e instanceof Error ? e.message : String(e)}`, "error");
    }
  };
  const orphans = saved.filter((s) => !scheds.some((d) => savedFor(d, [s])));
  return (
    <div className="schedules-panel" aria-label="schedules">
      <p className="muted small">
        Each tick starts one run, however many processes serve the flow. Edits take effect when the flow is saved; pausing takes effect at once, everywhere.
      </p>
      {scheds.length === 0 && <p className="muted">No schedules.</p>}
      {scheds.map((s, i) => {
        const sv = savedFor(s, saved);
        const mine = problems.filter((p) => p.path?.startsWith(`settings.schedules[${i}]`));
        return (
          <section key={i} className="schedule" data-schedule={i}>
            <div className="schedule-fields">
              <label className="field">
                <span className="small">Cron</span>
                <input className="code" aria-label={`cron of schedule ${i}`} value={s.cron} onChange={(e) => edit(i, { cron: e.target.value })} onBlur={() => store.seal()} />
              </label>
              <label className="field">
                <span className="small">Time zone</span>
                <input aria-label={`time zone of schedule ${i}`} value={s.timezone ?? ""} placeholder="UTC" onChange={(e) => edit(i, { timezone: e.target.value })} onBlur={() => store.seal()} />
              </label>
              <InputField value={s.input} onChange={(v) => edit(i, { input: v })} index={i} />
              <label className="check">
                <input type="checkbox" checked={s.enabled !== false} onChange={(e) => edit(i, { enabled: e.target.checked })} /> enabled
              </label>
              <button type="button" className="link danger" onClick={() => store.edit((d) => removeSchedule(d, i))}>
                Remove
              </button>
            </div>
            {mine.map((p, j) => (
              <p key={j} className="field-problem" role="alert">
                {p.message}
              </p>
            ))}
            {sv ? <Running s={sv} flow={doc.id} onToggle={() => void toggle(sv)} /> : <p className="muted small">{isNew ? "Save the flow to start this schedule." : "Not saved yet: save the flow to start this schedule."}</p>}
          </section>
        );
      })}
      <button type="button" onClick={() => store.edit((d) => addSchedule(d))}>
        Add a schedule
      </button>
      <p className="muted small">
        Cron: five fields (minute hour day-of-month month day-of-week), e.g. <code>0 9 * * 1-5</code>, or <code>@hourly</code>, <code>@daily</code>, <code>@every 10m</code>.
      </p>
      {orphans.length > 0 && (
        <section className="schedule orphan">
          <h3>Running, but not in this document</h3>
          <p className="muted small">The saved version runs these; saving the flow stops them.</p>
          {orphans.map((s) => (
            <div key={s.key}>
              <code>{s.cron}</code> {s.timezone && <span className="muted">({s.timezone})</span>}
              <Running s={s} flow={doc.id} onToggle={() => void toggle(s)} />
            </div>
          ))}
        </section>
      )}
    </div>
  );
}

function Running({ s, flow, onToggle }: { s: SavedSchedule; flow: string; onToggle: () => void }) {
  const state = !s.enabled ? "disabled" : s.paused ? "paused" : "running";
  return (
    <div className="schedule-running" data-state={state}>
      <div>
        <span className={`badge schedule-${state}`}>{state}</span>{" "}
        {s.enabled && (
          <button type="button" className="small" onClick={onToggle}>
            {s.paused ? "Resume" : "Pause"}
          </button>
        )}
      </div>
      {s.next.length > 0 && (
        <ul className="schedule-next small">
          {s.next.map((t) => (
            <li key={t} title={t}>
              {new Date(t).toLocaleString()} <span className="muted">({fromNow(t)})</span> <span className="schedule-zone muted">· {inZone(t, s.timezone)}</span>
            </li>
          ))}
        </ul>
      )}
      {s.runs.length > 0 ? (
        <ul className="schedule-runs small">
          {s.runs.map((r) => (
            <li key={r.id}>
              <a href={`/flows/${encodeURIComponent(flow)}/runs/${encodeURIComponent(r.id)}`}>{r.tick ? new Date(r.tick).toLocaleString() : r.id}</a> <span className={`run-chip status-${r.status}`}>{r.status}</span>
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted small">No runs yet.</p>
      )}
    </div>
  );
}

/** The schedule's input as JSON text; a value is written once the text parses. */
function InputField({ value, onChange, index }: { value: unknown; onChange: (v: unknown) => void; index: number }) {
  const [text, setText] = useState(value === undefined ? "" : JSON.stringify(value));
  const [bad, setBad] = useState(false);
  useEffect(() => {
    // Keep what is typed while it means the value; take the value when it changed elsewhere (undo).
    setText((t) => {
      try {
        if (t.trim() === "" ? value === undefined : equal(JSON.parse(t), value)) return t;
      } catch {
        /* not JSON yet */
      }
      return value === undefined ? "" : JSON.stringify(value);
    });
  }, [value]);
  return (
    <label className={`field${bad ? " field-invalid" : ""}`}>
      <span className="small">Input (JSON)</span>
      <input
        className="code"
        aria-label={`input of schedule ${index}`}
        value={text}
        placeholder="{}"
        aria-invalid={bad}
        onChange={(e) => {
          setText(e.target.value);
          if (e.target.value.trim() === "") {
            setBad(false);
            onChange(undefined);
            return;
          }
          try {
            onChange(JSON.parse(e.target.value));
            setBad(false);
          } catch {
            setBad(true);
          }
        }}
      />
      {bad && <p className="field-problem">not JSON yet</p>}
    </label>
  );
}
