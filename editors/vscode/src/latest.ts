// "Latest keystroke wins" scheduling for live search: every input cancels the search in
// flight and restarts the debounce delay, so at most one search runs and only the last
// input's answer is shown. Pure (no vscode import); unit-tested directly.

export interface Running {
  cancel(): void;
}

export class LatestOnly<Q> {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Running | undefined;
  private seq = 0;
  private stopped = false; // cancelled since the newest search started
  private readonly delayMs: number;
  private readonly start: (query: Q, seq: number) => Running;

  /** `start(query, seq)` begins a search and returns a handle to cancel it. */
  constructor(delayMs: number, start: (query: Q, seq: number) => Running) {
    this.delayMs = delayMs;
    this.start = start;
  }

  /** A keystroke: cancel the running search, and start a new one after the delay. */
  input(query: Q): void {
    this.cancel();
    this.timer = setTimeout(() => this.now(query), this.delayMs);
  }

  /** Start a search right away (a button press), cancelling the running one. */
  now(query: Q): void {
    this.cancel();
    this.seq += 1;
    this.stopped = false;
    this.running = this.start(query, this.seq);
  }

  /** Whether `seq` is the newest search (older answers are dropped). */
  isLatest(seq: number): boolean {
    return seq === this.seq && !this.stopped;
  }

  /** Stop the pending delay and the running search; its answer is no longer the latest
   * (an answer that still arrives is dropped). */
  cancel(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.running?.cancel();
    this.running = undefined;
  }

  /** Start the pending search now, if a keystroke is waiting for its delay (a search in
   * flight is left to finish): what was typed last is what the results show. */
  flush(query: Q): void {
    if (this.timer === undefined) return;
    this.now(query);
  }
}
