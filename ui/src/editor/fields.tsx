// Form fields of the inspector. Text is kept as typed while it is not yet a valid value
// (half-written JSON, say) and written to the document as soon as it is one.
import { useEffect, useId, useState } from "react";
import { formatField, parseField, placeholderOf, type Field } from "../flow/schema";
import { TextArea } from "./TextArea";

interface FieldProps {
  field: Field;
  value: unknown;
  problems: string[];
  onChange: (value: unknown) => void;
  onBlur?: () => void;
  /** Names of environment variables to offer for secrets. */
  envNames?: string[];
}

export function FieldRow({ label, help, problems, htmlFor, children, required }: { label: string; help?: string | undefined; problems: string[]; htmlFor?: string; children: React.ReactNode; required?: boolean }) {
  return (
    <div className={`field${problems.length ? " field-invalid" : ""}`}>
      <label htmlFor={htmlFor}>
        {label}
        {required && <span className="required" title="required"> *</span>}
      </label>
      {children}
      {help && <p className="help">{help}</p>}
      {problems.map((p, i) => (
        <p key={i} className="field-problem" role="alert">
          {p}
        </p>
      ))}
    </div>
  );
}

/** A text input or textarea that keeps what is typed and reports values it can read. */
function DraftText({ field, value, onChange, onBlur, id, invalid, listId }: { field: Field; value: unknown; onChange: (v: unknown) => void; onBlur?: (() => void) | undefined; id: string; invalid: boolean; listId?: string }) {
  const shown = formatField(field, value);
  const [draft, setDraft] = useState(shown);
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    // The value changed from outside (undo, another field): show it unless the draft means the same.
    const parsed = parseField(field, draft);
    if (formatField(field, parsed.value) !== shown) {
      setDraft(shown);
      setError(undefined);
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shown]);
  const change = (text: string) => {
    setDraft(text);
    const r = parseField(field, text);
    setError(r.error);
    if (!r.error || r.value !== undefined) {
      if (!r.error) onChange(r.value);
    }
  };
  const code = field.kind === "jq" || field.kind === "template" || field.kind === "json" || field.kind === "strings";
  const common = {
    id,
    value: draft,
    placeholder: placeholderOf(field),
    "aria-invalid": invalid || !!error,
    "data-param": field.name,
    spellCheck: !code,
    className: code ? "code" : undefined,
    onBlur,
  };
  return (
    <>
      {field.multiline || field.kind === "strings" ? (
        <TextArea {...common} rows={rowsFor(draft, field)} onText={change} />
      ) : (
        <input
          {...common}
          type={field.kind === "number" || field.kind === "integer" ? "number" : "text"}
          list={listId}
          min={field.min}
          max={field.max}
          step={field.kind === "integer" ? 1 : "any"}
          onChange={(e) => change(e.target.value)}
        />
      )}
      {error && (
        <p className="field-problem" role="alert">
          {error}
        </p>
      )}
    </>
  );
}

function rowsFor(text: string, f: Field): number {
  const lines = text.split("\n").length;
  return Math.min(Math.max(lines, f.kind === "json" ? 4 : 2), 14);
}

export function ParamField({ field, value, problems, onChange, onBlur, envNames = [] }: FieldProps) {
  const id = useId();
  const help = [field.description, field.kind === "jq" ? "jq expression" : field.kind === "template" ? "template: {{.key}} reads the state" : ""].filter(Boolean).join(" · ");
  const row = (child: React.ReactNode) => (
    <FieldRow label={field.label} help={help || undefined} problems={problems} htmlFor={id} required={field.required}>
      {child}
    </FieldRow>
  );
  switch (field.kind) {
    case "boolean":
      return row(
        <input
          id={id}
          type="checkbox"
          data-param={field.name}
          checked={typeof value === "boolean" ? value : field.default === true}
          onChange={(e) => onChange(e.target.checked === (field.default === true) && value === undefined ? undefined : e.target.checked)}
        />,
      );
    case "enum":
      return row(
        <select id={id} data-param={field.name} value={value === undefined ? "" : JSON.stringify(value)} onChange={(e) => onChange(e.target.value === "" ? undefined : JSON.parse(e.target.value))} aria-invalid={problems.length > 0}>
          <option value="">{field.default !== undefined ? `default (${String(field.default)})` : "—"}</option>
          {(field.options ?? []).map((o) => (
            <option key={JSON.stringify(o)} value={JSON.stringify(o)}>
              {String(o)}
            </option>
          ))}
        </select>,
      );
    case "secret": {
      const listId = id + "-env";
      return (
        <FieldRow label={field.label} help={`${field.description ?? ""} Secrets are never written into the flow: name an environment variable of the server that holds it.`} problems={problems} htmlFor={id} required={field.required}>
          <div className="env-picker">
            <span className="env-prefix" aria-hidden="true">
              $env
            </span>
            <DraftText field={field} value={value} onChange={onChange} onBlur={onBlur} id={id} invalid={problems.length > 0} listId={listId} />
          </div>
          <datalist id={listId}>
            {envNames.map((n) => (
              <option key={n} value={n} />
            ))}
          </datalist>
        </FieldRow>
      );
    }
    case "routes":
      return (
        <FieldRow label={field.label} help={field.description} problems={problems} required={field.required}>
          <RoutesEditor value={value} onChange={onChange} onBlur={onBlur} name={field.name} />
        </FieldRow>
      );
    default:
      return row(<DraftText field={field} value={value} onChange={onChange} onBlur={onBlur} id={id} invalid={problems.length > 0} />);
  }
}

/** Name -> jq rows; the order is kept (a router tries its routes in order). */
function RoutesEditor({ value, onChange, onBlur, name }: { value: unknown; onChange: (v: unknown) => void; onBlur?: (() => void) | undefined; name: string }) {
  const entries = value && typeof value === "object" && !Array.isArray(value) ? Object.entries(value as Record<string, unknown>) : [];
  const write = (rows: [string, unknown][]) => onChange(rows.length ? Object.fromEntries(rows) : undefined);
  const fresh = () => {
    for (let i = entries.length + 1; ; i++) if (!entries.some(([k]) => k === `route${i}`)) return `route${i}`;
  };
  const names = entries.map(([k]) => k);
  return (
    <div className="routes" data-param={name}>
      {entries.map(([k, v], i) => (
        <div className="route-row" key={i}>
          <RouteName index={i} name={k} others={names.filter((_, j) => j !== i)} onCommit={(next) => write(entries.map(([kk, vv], j) => (j === i ? [next, vv] : [kk, vv])))} onBlur={onBlur} />
          <TextArea
            className="code"
            rows={1}
            spellCheck={false}
            aria-label={`route ${k} condition (jq)`}
            value={typeof v === "string" ? v : ""}
            onText={(text) => write(entries.map(([kk, vv], j) => (j === i ? [kk, text] : [kk, vv])))}
            onBlur={onBlur}
          />
          <button type="button" className="icon" aria-label={`remove route ${k}`} onClick={() => write(entries.filter((_, j) => j !== i))}>
            ×
          </button>
        </div>
      ))}
      <button type="button" onClick={() => write([...entries, [fresh(), "true"]])}>
        Add route
      </button>
    </div>
  );
}

/**
 * A route's name, edited as text and committed on Enter or when the field is left: a
 * route is a key of an object, so writing every keystroke would merge two routes the
 * moment the text matched another's name. A name another route has is refused.
 */
function RouteName({ index, name, others, onCommit, onBlur }: { index: number; name: string; others: string[]; onCommit: (name: string) => void; onBlur?: (() => void) | undefined }) {
  const [draft, setDraft] = useState(name);
  const [refused, setRefused] = useState<string | undefined>();
  useEffect(() => {
    setDraft(name);
  }, [name]);
  const problem = draft.trim() === "" ? "a route needs a name" : others.includes(draft) ? `a route "${draft}" exists` : undefined;
  const commit = () => {
    if (draft === name) return;
    if (problem) {
      setRefused(`not renamed: ${problem}`);
      setDraft(name);
      return;
    }
    setRefused(undefined);
    onCommit(draft);
  };
  const message = draft !== name ? problem : refused;
  return (
    <div className="route-name">
      <input
        aria-label={`route ${index + 1} name`}
        value={draft}
        aria-invalid={draft !== name && !!problem}
        onChange={(e) => {
          setDraft(e.target.value);
          setRefused(undefined);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter") {
            e.preventDefault();
            commit();
          } else if (e.key === "Escape") setDraft(name);
        }}
        onBlur={() => {
          commit();
          onBlur?.();
        }}
      />
      {message && (
        <p className="field-problem" role="alert">
          {message}
        </p>
      )}
    </div>
  );
}
