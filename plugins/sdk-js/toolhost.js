// The toolhost plugin kit for JavaScript: declare each tool with a schema
// built here, and the SDK does the rest of the `toolhost:plugin` contract
// (wit/): `describe` from the declarations, `call` with the arguments
// checked, the result checked against its declared shape, and every
// failure turned into a `tool-error` the model can act on.
//
// This module imports nothing from the component, so an author's tests run
// it in Node.js with `FakeHost` (testing.js); `component.js` binds the
// host's real imports when the component is built.

/** A failure the calling model can act on (the WIT `tool-error`). */
export class ToolError extends Error {
  /**
   * @param {string} code stable snake_case word, e.g. `not_found`
   * @param {string} message what went wrong and what to do next, for the model
   * @param {boolean} [retryable] whether the same call may succeed later
   */
  constructor(code, message, retryable = false) {
    super(message);
    /** The stable code. */
    this.code = code;
    /** Whether the same call may succeed later. */
    this.retryable = retryable;
  }
}

/** A `state` operation the host refused or could not do (codes
 * `state_invalid_key`, `state_quota_exceeded`, `state_unavailable`). */
export class StateError extends ToolError {}

/** A value that does not fit its declared shape; `at` is a JSON pointer. */
export class ShapeError extends Error {
  constructor(at, problem) {
    super(`${at || '/'}: ${problem}`);
    this.at = at || '/';
    this.problem = problem;
  }
}

// ---------------------------------------------------------------------------
// Schemas: each builder knows its JSON Schema and checks values against it.

/** What every `s.*` builder returns: a JSON Schema and its check. */
class Shape {
  constructor(schema, check) {
    /** The JSON Schema, as `describe()` sends it. */
    this.json = schema;
    /** `check(value, at)` returns the value if it fits, or throws a `ShapeError` at JSON pointer `at`. */
    this.check = check;
    /** Whether an object may leave this field out. */
    this.isOptional = false;
  }

  /** The same shape, not required in its object (absent, or `null`, means unset). */
  optional() {
    const copy = new Shape(this.json, this.check);
    copy.isOptional = true;
    return copy;
  }

  /** The same shape with a `description` the model reads. */
  describe(text) {
    const copy = new Shape({ ...this.json, description: text }, this.check);
    copy.isOptional = this.isOptional;
    return copy;
  }
}

const kind = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function bounded(name, options, keys) {
  for (const key of keys) {
    if (options[key] === undefined) {
      throw new TypeError(`${name}: give ${keys.join(' and ')} (the lint refuses unbounded values)`);
    }
  }
}

/** Schema builders. Every string, number and list carries its bounds, and
 * every object is closed, so schemas pass `toolhost lint` as they are. */
export const s = {
  /** `s.string({ maxLength, minLength?, pattern? })`, or `s.string({ enum: [...] })`. */
  string(options = {}) {
    if (options.enum === undefined && options.pattern === undefined) bounded('s.string', options, ['maxLength']);
    const schema = { type: 'string', ...options };
    const pattern = options.pattern === undefined ? null : new RegExp(options.pattern, 'u');
    return new Shape(schema, (v, at) => {
      if (typeof v !== 'string') throw new ShapeError(at, 'expected a string');
      const length = [...v].length;
      if (options.maxLength !== undefined && length > options.maxLength) throw new ShapeError(at, `longer than ${options.maxLength} characters`);
      if (options.minLength !== undefined && length < options.minLength) throw new ShapeError(at, `shorter than ${options.minLength} characters`);
      if (pattern && !pattern.test(v)) throw new ShapeError(at, `must match ${options.pattern}`);
      if (options.enum && !options.enum.includes(v)) throw new ShapeError(at, `must be one of ${options.enum.join(', ')}`);
      return v;
    });
  },

  /** `s.integer({ minimum, maximum })`. */
  integer(options = {}) {
    bounded('s.integer', options, ['minimum', 'maximum']);
    return number('integer', options);
  },

  /** `s.number({ minimum, maximum })`. */
  number(options = {}) {
    bounded('s.number', options, ['minimum', 'maximum']);
    return number('number', options);
  },

  /** `s.boolean()`. */
  boolean() {
    return new Shape({ type: 'boolean' }, (v, at) => {
      if (typeof v !== 'boolean') throw new ShapeError(at, 'expected true or false');
      return v;
    });
  },

  /** `s.array(items, { maxItems, minItems? })`. */
  array(items, options = {}) {
    bounded('s.array', options, ['maxItems']);
    return new Shape({ type: 'array', items: items.json, ...options }, (v, at) => {
      if (!Array.isArray(v)) throw new ShapeError(at, 'expected a list');
      if (v.length > options.maxItems) throw new ShapeError(at, `more than ${options.maxItems} items`);
      if (options.minItems !== undefined && v.length < options.minItems) throw new ShapeError(at, `fewer than ${options.minItems} items`);
      return v.map((item, i) => items.check(item, `${at}/${i}`));
    });
  },

  /** A closed object: `s.object({ name: s.string({...}), note: s.string({...}).optional() })`. */
  object(properties) {
    const required = Object.keys(properties).filter((k) => !properties[k].isOptional);
    const json = {
      type: 'object',
      properties: Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, v.json])),
      required,
      additionalProperties: false,
    };
    return new Shape(json, (v, at) => {
      if (kind(v) !== 'object') throw new ShapeError(at, 'expected an object');
      const out = {};
      for (const key of Object.keys(v)) {
        if (!Object.hasOwn(properties, key)) throw new ShapeError(`${at}/${key}`, 'no such field');
      }
      for (const [key, shape] of Object.entries(properties)) {
        // Own fields only: `constructor` and the like are not arguments.
        const value = Object.hasOwn(v, key) ? v[key] : undefined;
        if (value === undefined || value === null) {
          if (!shape.isOptional) throw new ShapeError(`${at}/${key}`, 'missing');
          continue;
        }
        out[key] = shape.check(value, `${at}/${key}`);
      }
      return out;
    });
  },
};

function number(type, options) {
  return new Shape({ type, ...options }, (v, at) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ShapeError(at, 'expected a number');
    if (type === 'integer' && !Number.isInteger(v)) throw new ShapeError(at, 'expected a whole number');
    if (v < options.minimum || v > options.maximum) throw new ShapeError(at, `must be from ${options.minimum} to ${options.maximum}`);
    return v;
  });
}

// ---------------------------------------------------------------------------
// The host's imports, bound by component.js (or a FakeHost in tests).

let host = null;

/** Binds the host's imports: `{ config, log, state }` as the component
 * imports them (component.js does this), or a FakeHost in tests. */
export function bind(imports) {
  host = imports;
}

function bound() {
  if (host === null) throw new Error('toolhost: no host bound; import component.js in app.js, or use FakeHost in tests');
  return host;
}

/** Non-secret settings from the manifest's `config` table. */
export const config = {
  /** The value for `key`, or `undefined`. */
  get(key) {
    return bound().config.get(key) ?? undefined;
  },
  /** The value for `key`; a `not_configured` tool error if the manifest sets none. */
  require(key) {
    const value = config.get(key);
    if (value === undefined) throw new ToolError('not_configured', `the plugin needs \`${key}\` in its manifest config; ask the platform team to set it`);
    return value;
  },
};

/** Lines for the host's log (never seen by the client nor the audit trail);
 * the host caps how many a call may write. */
export const log = {
  /** Detail useful only while developing the plugin. */
  debug: (message) => bound().log.write('debug', String(message)),
  /** Normal operation worth recording. */
  info: (message) => bound().log.write('info', String(message)),
  /** Something unexpected that the plugin handled. */
  warn: (message) => bound().log.write('warn', String(message)),
  /** A failure. */
  error: (message) => bound().log.write('error', String(message)),
};

function stateCall(operation) {
  try {
    return operation();
  } catch (e) {
    const variant = e && e.payload ? e.payload : e;
    switch (variant && variant.tag) {
      case 'invalid-key':
        throw new StateError('state_invalid_key', 'the state key is empty, longer than 256 bytes or holds a control character');
      case 'quota-exceeded':
        throw new StateError('state_quota_exceeded', "the plugin's stored state would pass its quota (limits.state_kib); delete something first");
      case 'unavailable':
        throw new StateError('state_unavailable', `the host could not reach its store (${variant.val}); try again later`, true);
      default:
        throw e;
    }
  }
}

/** The plugin's durable key-value storage, kept by the host. Every function
 * throws a `StateError` when the host refuses or cannot do the operation. */
export const state = {
  /** The value under `key`, or `undefined`. */
  get: (key) => stateCall(() => bound().state.get(key)) ?? undefined,
  /** Stores `value` under `key`. */
  set: (key, value) => stateCall(() => bound().state.set(key, value)),
  /** Stores `value` only if the current value is `expected` (`undefined`:
   * only if absent); returns whether it stored, atomically. */
  compareAndSet: (key, expected, value) => stateCall(() => bound().state.compareAndSet(key, expected ?? undefined, value)),
  /** Removes `key`; returns whether it existed. */
  delete: (key) => stateCall(() => bound().state.delete(key)),
  /** The keys starting with `prefix`, in byte order. */
  listKeys: (prefix = '') => stateCall(() => bound().state.listKeys(prefix)),
  /** The JSON value under `key`, or `undefined`. */
  getJson(key) {
    const text = state.get(key);
    return text === undefined ? undefined : JSON.parse(text);
  },
  /** Stores `value` as JSON under `key`. */
  setJson: (key, value) => state.set(key, JSON.stringify(value)),
};

// ---------------------------------------------------------------------------
// Tools.

const NO_ARGUMENTS = s.object({});

/** The plugin's tools; `exports()` gives the component's `tools` export. */
export class Plugin {
  constructor() {
    this.tools = new Map();
  }

  /**
   * Declares a tool.
   * @param {object} tool
   * @param {string} tool.name `<plugin>_<object>_<verb>`
   * @param {string} tool.title short title for people
   * @param {string} tool.description what it does, changes and refuses
   * @param {Shape} [tool.input] the arguments (`s.object({...})`); none if absent
   * @param {Shape} tool.output the result (`s.object({...})`)
   * @param {(ctx: {sessionId: string, taskId?: string, callId: string}, args: object) => object | Promise<object>} tool.run
   */
  tool({ name, title, description, input = NO_ARGUMENTS, output, run }) {
    if (this.tools.has(name)) throw new TypeError(`${name}: declared twice`);
    if (!output || output.json.type !== 'object') throw new TypeError(`${name}: give output: s.object({...})`);
    if (input.json.type !== 'object') throw new TypeError(`${name}: give input: s.object({...})`);
    this.tools.set(name, { name, title, description, input, output, run });
    return this;
  }

  /** What `describe()` returns. */
  specs() {
    return [...this.tools.values()].map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: JSON.stringify(t.input.json),
      outputSchema: JSON.stringify(t.output.json),
    }));
  }

  /** Runs one call; resolves to the result's JSON text, or rejects with a
   * `ToolError` (an unexpected exception becomes `plugin_error`). */
  async run(name, argumentsJson, context) {
    const tool = this.tools.get(name);
    if (!tool) throw new ToolError('unknown_tool', `this plugin has no tool named ${JSON.stringify(name)}`);
    let args;
    try {
      args = tool.input.check(JSON.parse(argumentsJson), '');
    } catch (e) {
      if (e instanceof ShapeError) throw new ToolError('invalid_arguments', `argument ${e.at}: ${e.problem}`);
      throw unexpected(name, e);
    }
    let value;
    try {
      value = await tool.run(context, args);
    } catch (e) {
      if (e instanceof ToolError) throw e;
      throw unexpected(name, e);
    }
    try {
      return JSON.stringify(tool.output.check(value, ''));
    } catch (e) {
      if (!(e instanceof ShapeError)) throw unexpected(name, e);
      safeLog(`${name}: result does not fit its output schema at ${e.message}`);
      throw new ToolError('plugin_error', `the tool's result did not fit its declared shape (${e.at}); this is a bug in the plugin`);
    }
  }

  /** The object to export as `tools` from the component's entry module. */
  exports() {
    const plugin = this;
    return {
      describe: () => plugin.specs(),
      async call(name, argumentsJson, context) {
        try {
          return await plugin.run(name, argumentsJson, context);
        } catch (e) {
          const error = e instanceof ToolError ? e : unexpected(name, e);
          // componentize-js turns a thrown value's `payload` into the
          // `tool-error` of the result.
          const thrown = new Error(error.message);
          thrown.payload = { code: error.code, message: error.message, retryable: error.retryable };
          throw thrown;
        }
      },
    };
  }
}

function safeLog(message) {
  try {
    log.error(message);
  } catch {
    // The call must end cleanly whatever the log does.
  }
}

function unexpected(name, e) {
  const what = e && e.constructor ? e.constructor.name : typeof e;
  safeLog(`${name}: unhandled ${what}: ${e && e.stack ? e.stack : String(e)}`.slice(0, 2000));
  return new ToolError('plugin_error', `the tool failed with an unexpected ${what}; the host's log has the details`);
}
