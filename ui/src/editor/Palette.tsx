// The palette: every component from /api/components, grouped by category, with search.
// Drag an item onto the canvas, or press Enter (or click) to add it in the middle.
import { useMemo, useRef, useState } from "react";
import type { ComponentSpec } from "../flow/types";

const CATEGORY_TITLES: Record<string, string> = { io: "Input and output", ai: "AI", llm: "AI", flow: "Control flow", data: "Data", tools: "Tools", tool: "Tools", human: "People" };

export function categoryTitle(c: string): string {
  return CATEGORY_TITLES[c] ?? c.charAt(0).toUpperCase() + c.slice(1);
}

interface Props {
  specs: ComponentSpec[];
  /** Adds a component; at a screen point when dropped, else where the view is. */
  onAdd: (type: string, at?: { x: number; y: number }) => void;
}

export function Palette({ specs, onAdd }: Props) {
  const [query, setQuery] = useState("");
  const groups = useMemo(() => {
    const q = query.trim().toLowerCase();
    const m = new Map<string, ComponentSpec[]>();
    for (const s of specs) {
      if (q && !`${s.name} ${s.title} ${s.category} ${s.description}`.toLowerCase().includes(q)) continue;
      m.set(s.category, [...(m.get(s.category) ?? []), s]);
    }
    return [...m.entries()];
  }, [specs, query]);
  const drag = useRef<{ type: string; x: number; y: number; ghost?: HTMLElement; moved: boolean } | null>(null);

  const onPointerDown = (e: React.PointerEvent, spec: ComponentSpec) => {
    if (e.button !== 0) return;
    drag.current = { type: spec.name, x: e.clientX, y: e.clientY, moved: false };
    const move = (ev: PointerEvent) => {
      const d = drag.current;
      if (!d) return;
      if (!d.moved && Math.hypot(ev.clientX - d.x, ev.clientY - d.y) < 5) return;
      if (!d.moved) {
        d.moved = true;
        const g = document.createElement("div");
        g.className = "palette-ghost";
        g.textContent = spec.title;
        document.body.appendChild(g);
        d.ghost = g;
      }
      d.ghost!.style.transform = `translate(${ev.clientX + 8}px, ${ev.clientY + 8}px)`;
    };
    const up = (ev: PointerEvent) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      const d = drag.current;
      if (!d) return;
      d.ghost?.remove();
      if (d.moved) {
        const target = document.elementFromPoint(ev.clientX, ev.clientY);
        if (target?.closest(".react-flow")) onAdd(d.type, { x: ev.clientX, y: ev.clientY });
        // keep drag.current set until the click that follows is swallowed
        setTimeout(() => (drag.current = null), 0);
      } else {
        drag.current = null;
      }
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  };

  return (
    <aside className="palette" aria-label="Components">
      <input
        type="search"
        className="palette-search"
        placeholder="Search components"
        aria-label="Search components"
        value={query}
        onChange={(e) => setQuery(e.target.value)}
      />
      <p className="hint muted">Drag onto the canvas, or press Enter to add.</p>
      {groups.length === 0 && <p className="empty">No component matches “{query}”.</p>}
      {groups.map(([cat, list]) => (
        <section key={cat} className="palette-group">
          <h3>{categoryTitle(cat)}</h3>
          {list.map((s) => (
            <button
              key={s.name}
              type="button"
              className={`palette-item cat-${s.category}`}
              data-type={s.name}
              title={s.description}
              onPointerDown={(e) => onPointerDown(e, s)}
              onClick={() => {
                if (drag.current?.moved) return;
                onAdd(s.name);
              }}
            >
              <span className="palette-title">{s.title}</span>
              <span className="palette-desc">{firstSentence(s.description)}</span>
            </button>
          ))}
        </section>
      ))}
    </aside>
  );
}

function firstSentence(s: string): string {
  const i = s.indexOf(". ");
  return i > 0 ? s.slice(0, i + 1) : s;
}
