// The live connection: one websocket to /ws, subscribed to a flow, that reconnects after
// a drop and resumes after the last event it saw, so nothing in between is lost.
import type { FlowQueues, LiveEvent, LiveMessage } from "../api/types";

export interface LiveHandlers {
  event?: (ev: LiveEvent) => void;
  queues?: (q: FlowQueues) => void;
  /** Connected (and subscribed) or not. */
  status?: (connected: boolean) => void;
}

export class LiveFlow {
  private ws: WebSocket | undefined;
  private lastEventID = "";
  private closed = false;
  private retry = 500;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private subscribed: Promise<void>;
  private resolveSubscribed!: () => void;

  /** after: the id of the last event already seen (the events after it come first). */
  constructor(
    readonly flow: string,
    private readonly on: LiveHandlers,
    after = "",
  ) {
    this.lastEventID = after;
    this.subscribed = new Promise((r) => (this.resolveSubscribed = r));
    this.connect();
  }

  /** Resolves once the first subscription is acknowledged: events after it will arrive. */
  ready(timeoutMs = 5000): Promise<void> {
    return Promise.race([this.subscribed, new Promise<void>((r) => setTimeout(r, timeoutMs))]);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.ws?.close();
  }

  private connect(): void {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams({ flow: this.flow });
    if (this.lastEventID) q.set("last_event_id", this.lastEventID);
    const ws = new WebSocket(`${proto}//${location.host}/ws?${q}`);
    this.ws = ws;
    ws.onmessage = (m) => {
      let msg: LiveMessage;
      try {
        msg = JSON.parse(String(m.data)) as LiveMessage;
      } catch {
        return;
      }
      switch (msg.type) {
        case "subscribed":
          this.retry = 500;
          this.resolveSubscribed();
          this.on.status?.(true);
          break;
        case "event":
          if (msg.event) {
            if (msg.event.id) this.lastEventID = msg.event.id;
            this.on.event?.(msg.event);
          }
          break;
        case "queues":
          if (msg.queues) this.on.queues?.(msg.queues);
          break;
      }
    };
    ws.onclose = () => {
      this.on.status?.(false);
      if (this.closed) return;
      this.timer = setTimeout(() => this.connect(), this.retry);
      this.retry = Math.min(this.retry * 2, 10_000);
    };
  }
}
