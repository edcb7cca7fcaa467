// The one error the model layer throws for bad configuration (spec string or environment).
import { AgentKitError } from '../errors.js';

/** A model spec or its environment is invalid; the message says what was given and what works. */
export class ModelConfigError extends AgentKitError {
  override readonly code = 'MODEL_CONFIG';
}
