// A vitest sequencer that starts the named files first, in the order given, then the rest in
// vitest's own order. Vitest orders by the durations of the last run, which misleads a suite run
// on two stores: CI's Postgres pass, after the embedded one, ran the package test (skipped on the
// embedded store, so it looked quick) last and alone for 80 s of its 350. With two workers the
// long files must start first, or one of them ends the run alone.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export function longestFirst(first: readonly string[]): typeof BaseSequencer {
  return class LongestFirst extends BaseSequencer {
    override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
      const rank = (file: TestSpecification) => {
        const at = first.findIndex((name) => file.moduleId.endsWith(name));
        return at < 0 ? first.length : at;
      };
      const ordered = (await super.sort(files)).map((file, i) => ({ file, i }));
      return ordered.sort((a, b) => rank(a.file) - rank(b.file) || a.i - b.i).map(({ file }) => file);
    }
  };
}
