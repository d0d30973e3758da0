// A textarea whose typing the browser undoes as in any page: Ctrl/Cmd+Z takes back what
// was typed, not one character at a time. React writes a controlled textarea's value into
// its default value (its text node) on every render, and Chrome then keeps one undo step
// per character (facebook/react#8514). This one is uncontrolled: the browser keeps what
// is typed, and the value is written in only when it changes from outside (an undo of
// the graph, a value another field set), which starts the field's undo history afresh.
import { useLayoutEffect, useRef, type TextareaHTMLAttributes } from "react";

type Props = Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "value" | "defaultValue" | "onChange" | "children"> & {
  value: string;
  /** What the field holds after each change a person makes. */
  onText: (text: string) => void;
};

export function TextArea({ value, onText, ...rest }: Props) {
  const ref = useRef<HTMLTextAreaElement>(null);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && el.value !== value) el.value = value;
  }, [value]);
  return <textarea ref={ref} {...rest} onChange={(e) => onText(e.currentTarget.value)} />;
}
