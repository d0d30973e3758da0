// The keyboard help overlay (?): every shortcut of flow/shortcuts.ts.
import { useEffect, useRef } from "react";
import { SHORTCUTS } from "../flow/shortcuts";

export function KeyboardHelp({ onClose }: { onClose: () => void }) {
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    close.current?.focus();
  }, []);
  return (
    <div className="overlay" onClick={onClose}>
      <div className="overlay-box" role="dialog" aria-modal="true" aria-labelledby="keyboard-help-title" id="keyboard-help" onClick={(e) => e.stopPropagation()}>
        <div className="overlay-head">
          <h2 id="keyboard-help-title">Keyboard shortcuts</h2>
          <button type="button" ref={close} className="icon" aria-label="Close" onClick={onClose}>
            ×
          </button>
        </div>
        <table className="shortcuts">
          <tbody>
            {SHORTCUTS.map((s) => (
              <tr key={s.what}>
                <td>
                  {s.keys.map((k, i) => (
                    <span key={k}>
                      {i > 0 && " or "}
                      <kbd>{k}</kbd>
                    </span>
                  ))}
                </td>
                <td>{s.what}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted small">Letters act when no text field has the focus.</p>
      </div>
    </div>
  );
}
