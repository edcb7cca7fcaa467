// The options a CLI command would act on: `args` parsed by the real program definition (its
// option parsers and checks included), with the command's action replaced by a recorder.
import { buildProgram } from '../../src/cli/main.js';

export async function parseCommandArgs<T>(command: string, args: string[]): Promise<T> {
  const program = await buildProgram();
  let parsed: T | undefined;
  program.commands.find((c) => c.name() === command)!.action((options: T) => { parsed = options; });
  await program.parseAsync(['node', 'agent-kit', command, ...args]);
  return parsed!;
}
