// The simulation's step log: one line per scheduler action, with ids shortened to names given in
// creation order (t1, r3), so two replays of a seed print the same log although the database
// draws fresh UUIDs. Kept as a bounded tail plus a running hash of every line.

const uuidPattern = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

export class Names {
  private readonly byId = new Map<string, string>();
  private readonly order = new Map<string, number>();
  private counts = { t: 0, r: 0, x: 0 };

  /** Name an id the first time it is seen as a thread or a run. */
  add(id: string, kind: 't' | 'r'): string {
    const existing = this.byId.get(id);
    if (existing) return existing;
    const name = `${kind}${++this.counts[kind]}`;
    this.byId.set(id, name);
    this.order.set(id, this.order.size);
    return name;
  }

  of(id: string): string {
    return this.byId.get(id) ?? this.add(id, 'r');
  }

  /** Order of first sight: a deterministic sort key for rows whose ids are random. */
  rank(id: string): number {
    this.of(id);
    return this.order.get(id)!;
  }

  /** Replace every UUID in `text` by its name (unknown ones get the next `x` name). */
  shorten(text: string): string {
    return text.replace(uuidPattern, (id) => {
      let name = this.byId.get(id);
      if (!name) {
        name = `x${++this.counts.x}`;
        this.byId.set(id, name);
        this.order.set(id, this.order.size);
      }
      return name;
    });
  }
}

export class StepLog {
  private readonly lines: string[] = [];
  private hash = 0x811c9dc5;
  count = 0;

  constructor(
    private readonly names: Names,
    private readonly keep = 80,
    private readonly echo?: (line: string) => void,
  ) {}

  add(step: number, nowMs: number, startMs: number, text: string): void {
    const line = `#${step} t+${nowMs - startMs}ms ${this.names.shorten(text)}`;
    for (let i = 0; i < line.length; i++) this.hash = Math.imul(this.hash ^ line.charCodeAt(i), 0x01000193) >>> 0;
    this.count++;
    this.lines.push(line);
    if (this.lines.length > this.keep) this.lines.shift();
    this.echo?.(line);
  }

  tail(n = this.keep): string[] {
    return this.lines.slice(-n);
  }

  /** A fingerprint of the whole log: equal for two runs of a seed when the replay is exact. */
  digest(): string {
    return `${this.count}:${this.hash.toString(16).padStart(8, '0')}`;
  }
}
