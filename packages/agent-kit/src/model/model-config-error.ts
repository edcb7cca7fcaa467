// The one error the model layer throws for bad configuration (spec string or environment).
// It lives here rather than in src/errors.ts so this folder stays self-contained.

/** A model spec or its environment is invalid; the message says what was given and what works. */
export class ModelConfigError extends Error {
  readonly code = 'MODEL_CONFIG';

  constructor(message: string) {
    super(message);
    this.name = 'ModelConfigError';
  }
}
