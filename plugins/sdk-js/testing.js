// Run a plugin's tools in Node.js, for the author's own tests: FakeHost
// stands in for the host's imports (config from an object, log lines kept,
// state in a Map with the host's key rules and a quota). HTTP is the
// global `fetch`: a test replaces `globalThis.fetch` to answer for the
// upstream.
//
//   const host = new FakeHost({ config: { base_url: 'http://upstream' } });
//   const result = await host.call(plugin, 'greeter_greeting_get', { name: 'Ada' });
import { bind } from './toolhost.js';

const encoder = new TextEncoder();

/** In-memory stand-ins for the host's `config`, `log` and `state` imports. */
export class FakeHost {
  /**
   * @param {object} [options]
   * @param {object} [options.config] the manifest's config table (values become strings)
   * @param {object} [options.state] the plugin's keys and values to start from
   * @param {number} [options.stateBytes] the quota of keys and values together, as `limits.state_kib` sets it
   */
  constructor({ config = {}, state = {}, stateBytes = 1 << 20 } = {}) {
    this.configValues = Object.fromEntries(Object.entries(config).map(([k, v]) => [k, String(v)]));
    this.stateValues = new Map(Object.entries(state));
    /** `[level, message]` of every line the plugin wrote. */
    this.logs = [];
    this.stateBytes = stateBytes;
    const fake = this;
    const checkKey = (key) => {
      // eslint-disable-next-line no-control-regex
      if (!key || encoder.encode(key).length > 256 || /[\u0000-\u001f\u007f]/.test(key)) {
        throw { payload: { tag: 'invalid-key' } };
      }
    };
    this.imports = {
      config: { get: (key) => fake.configValues[key] },
      log: { write: (level, message) => fake.logs.push([level, message]) },
      state: {
        get(key) {
          checkKey(key);
          return fake.stateValues.get(key);
        },
        set(key, value) {
          checkKey(key);
          const after = new Map(fake.stateValues).set(key, value);
          let bytes = 0;
          for (const [k, v] of after) bytes += encoder.encode(k).length + encoder.encode(v).length;
          if (bytes > fake.stateBytes) throw { payload: { tag: 'quota-exceeded' } };
          fake.stateValues.set(key, value);
        },
        compareAndSet(key, expected, value) {
          checkKey(key);
          if (fake.stateValues.get(key) !== expected) return false;
          this.set(key, value);
          return true;
        },
        delete(key) {
          checkKey(key);
          return fake.stateValues.delete(key);
        },
        listKeys(prefix) {
          return [...fake.stateValues.keys()].filter((k) => k.startsWith(prefix)).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
        },
      },
    };
  }

  /** Calls `tool` as the host would; resolves to its parsed result, or
   * rejects with the `ToolError`. */
  async call(plugin, tool, args = {}, taskId = undefined) {
    bind(this.imports);
    const text = await plugin.run(tool, JSON.stringify(args), { sessionId: 'test-session', taskId, callId: 'test-call' });
    return JSON.parse(text);
  }
}
