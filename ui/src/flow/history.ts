// Undo history of snapshots. Edits that continue one another (typing into the same
// field) share a group and undo together.

export class History<T> {
  private past: T[] = [];
  private future: T[] = [];
  private lastGroup: string | undefined;

  constructor(private readonly limit = 200) {}

  /** Records before, the state an edit is about to replace. */
  record(before: T, group?: string): void {
    if (group !== undefined && group === this.lastGroup && this.past.length > 0) {
      this.future = [];
      return;
    }
    this.past.push(before);
    if (this.past.length > this.limit) this.past.shift();
    this.future = [];
    this.lastGroup = group;
  }

  /** The state to go back to from current, or undefined when there is none. */
  undo(current: T): T | undefined {
    const prev = this.past.pop();
    if (prev === undefined) return undefined;
    this.future.push(current);
    this.lastGroup = undefined;
    return prev;
  }

  redo(current: T): T | undefined {
    const next = this.future.pop();
    if (next === undefined) return undefined;
    this.past.push(current);
    this.lastGroup = undefined;
    return next;
  }

  /** Ends the current group: the next edit is a step of its own. */
  seal(): void {
    this.lastGroup = undefined;
  }

  get canUndo(): boolean {
    return this.past.length > 0;
  }

  get canRedo(): boolean {
    return this.future.length > 0;
  }
}
