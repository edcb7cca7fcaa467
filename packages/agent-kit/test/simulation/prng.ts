// Seeded randomness for the simulator. Every decision of a schedule (which statement runs next,
// which fault strikes, what the user types) comes from a Prng stream derived from the seed, so a
// seed replays exactly. Nothing in the simulator's decisions may use Math.random or a clock.

/** A small, fast, seedable PRNG (mulberry32) with the helpers the scheduler needs. */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = (seed ^ 0x9e3779b9) >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** An integer in [0, max). */
  int(max: number): number {
    return Math.floor(this.next() * max);
  }

  /** An integer in [min, max], both included. */
  between(min: number, max: number): number {
    return min + this.int(max - min + 1);
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Prng.pick: no items to pick from');
    return items[this.int(items.length)]!;
  }

  /** Pick by weight; entries with weight <= 0 are never picked. */
  weighted<T>(entries: readonly (readonly [T, number])[]): T {
    const total = entries.reduce((sum, [, weight]) => sum + Math.max(0, weight), 0);
    if (!(total > 0)) throw new Error('Prng.weighted: no entry has a positive weight');
    let roll = this.next() * total;
    for (const [value, weight] of entries) {
      if (weight <= 0) continue;
      roll -= weight;
      if (roll < 0) return value;
    }
    return entries.findLast(([, weight]) => weight > 0)![0];
  }

  /**
   * An independent stream for one concern (faults, user input, …): drawing from one stream never
   * shifts another, so adding a decision point to one concern leaves the others' choices alone.
   */
  fork(label: string): Prng {
    let hash = 0x811c9dc5;
    for (let i = 0; i < label.length; i++) hash = Math.imul(hash ^ label.charCodeAt(i), 0x01000193) >>> 0;
    return new Prng((this.state ^ hash) >>> 0);
  }
}
