// A flow's pinned node outputs, kept in this browser's storage so that they survive a
// reload and show in every tab of the flow (flow/pins.ts decides what a pin is and what a
// run sends). Never part of the flow document: pinning does not change its version.
import { parsePins, pinsKey, removePin, serializePins, setPin, type Pins, type StoredPin } from "../flow/pins";

type Storage = Pick<globalThis.Storage, "getItem" | "setItem" | "removeItem">;

export class PinStore {
  private pins: Pins;
  private readonly listeners = new Set<() => void>();

  constructor(
    private flow: string,
    private readonly storage: Storage | undefined,
  ) {
    this.pins = this.read();
  }

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  };

  get = (): Pins => this.pins;

  /** Follows the flow's id (a new flow gets its id when first saved). */
  setFlow(flow: string): void {
    if (flow === this.flow) return;
    this.flow = flow;
    this.replace(this.read());
  }

  pin(node: string, p: StoredPin): void {
    this.write(setPin(this.pins, node, p));
  }

  unpin(node: string): void {
    this.write(removePin(this.pins, node));
  }

  clear(): void {
    this.write({});
  }

  /** Another tab changed the storage: take its pins if they are this flow's. */
  storageChanged(key: string | null): void {
    if (key === null || key === pinsKey(this.flow)) this.replace(this.read());
  }

  private read(): Pins {
    try {
      return parsePins(this.storage?.getItem(pinsKey(this.flow)) ?? null);
    } catch {
      return {};
    }
  }

  private write(next: Pins): void {
    if (next === this.pins) return;
    try {
      if (Object.keys(next).length === 0) this.storage?.removeItem(pinsKey(this.flow));
      else this.storage?.setItem(pinsKey(this.flow), serializePins(next));
    } catch {
      /* storage full or off: the pins last as long as the page */
    }
    this.replace(next);
  }

  private replace(next: Pins): void {
    this.pins = next;
    this.listeners.forEach((f) => f());
  }
}
