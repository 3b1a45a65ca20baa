// The JavaScript SDK's own tests, in Node.js: `node --test` in plugins/sdk-js.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FakeHost } from './testing.js';
import { Plugin, StateError, ToolError, s, state } from './toolhost.js';

const plugin = new Plugin();
plugin.tool({
  name: 'demo_echo_get',
  title: 'Echo',
  description: 'Echoes its arguments; changes nothing.',
  input: s.object({
    query: s.string({ minLength: 1, maxLength: 20, pattern: '^[a-z ]+$' }).describe('words'),
    kind: s.string({ enum: ['a', 'b'] }).optional(),
    limit: s.integer({ minimum: 1, maximum: 5 }).optional(),
    tags: s.array(s.string({ maxLength: 4 }), { maxItems: 2 }).optional(),
  }),
  output: s.object({ text: s.string({ maxLength: 100 }), count: s.integer({ minimum: 0, maximum: 10 }) }),
  async run(ctx, args) {
    if (args.query === 'boom') throw new TypeError('nope');
    if (args.query === 'bad result') return { text: 'x', count: 'many' };
    if (args.query === 'refuse') throw new ToolError('refused', 'no', true);
    return { text: `${args.kind ?? 'a'}:${args.query}:${args.limit ?? 2}`, count: (args.tags ?? []).length };
  },
});
plugin.tool({
  name: 'demo_counter_update',
  title: 'Count',
  description: 'Counts calls in state; changes the counter.',
  output: s.object({ count: s.integer({ minimum: 0, maximum: 1000 }) }),
  run() {
    const n = Number(state.get('n') ?? 0) + 1;
    if (!state.compareAndSet('n', n === 1 ? undefined : String(n - 1), String(n))) throw new ToolError('conflict', 'lost the race');
    return { count: n };
  },
});

test('schemas are closed, bounded and described', () => {
  const [echo, counter] = plugin.specs().map((spec) => JSON.parse(spec.inputSchema));
  assert.deepEqual(echo.required, ['query']);
  assert.equal(echo.additionalProperties, false);
  assert.deepEqual(echo.properties.query, { type: 'string', minLength: 1, maxLength: 20, pattern: '^[a-z ]+$', description: 'words' });
  assert.deepEqual(echo.properties.tags, { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 2 });
  assert.deepEqual(counter, { type: 'object', properties: {}, required: [], additionalProperties: false });
});

test('an unbounded shape is refused when it is declared', () => {
  assert.throws(() => s.string(), TypeError);
  assert.throws(() => s.integer({ minimum: 0 }), TypeError);
  assert.throws(() => s.array(s.boolean()), TypeError);
});

test('arguments are checked; tool errors pass; other exceptions are plugin_error', async () => {
  const host = new FakeHost();
  assert.deepEqual(await host.call(plugin, 'demo_echo_get', { query: 'hi', tags: ['ab'] }), { text: 'a:hi:2', count: 1 });
  for (const bad of [{ query: 'HI' }, { query: 'hi', limit: 9 }, { query: 'hi', extra: 1 }, {}, { query: 'hi', kind: 'c' }]) {
    await assert.rejects(host.call(plugin, 'demo_echo_get', bad), { code: 'invalid_arguments' });
  }
  await assert.rejects(host.call(plugin, 'demo_echo_get', { query: 'refuse' }), { code: 'refused', retryable: true });
  await assert.rejects(host.call(plugin, 'demo_echo_get', { query: 'boom' }), (e) => e.code === 'plugin_error' && !e.message.includes('nope'));
  assert.match(host.logs.at(-1)[1], /TypeError/);
  await assert.rejects(host.call(plugin, 'demo_echo_get', { query: 'bad result' }), (e) => e.code === 'plugin_error' && e.message.includes('/count'));
});

test('state compare-and-set, and its errors', async () => {
  const host = new FakeHost();
  assert.equal((await host.call(plugin, 'demo_counter_update')).count, 1);
  assert.equal((await host.call(plugin, 'demo_counter_update')).count, 2);
  await assert.rejects(new FakeHost({ stateBytes: 1 }).call(plugin, 'demo_counter_update'), (e) => e instanceof StateError && e.code === 'state_quota_exceeded');
});

test('the export turns every failure into a tool-error payload', async () => {
  new FakeHost().call(plugin, 'demo_counter_update');
  const tools = plugin.exports();
  await assert.rejects(tools.call('demo_echo_get', '{"query": "boom"}', { sessionId: 's', callId: 'c' }), (e) => e.payload.code === 'plugin_error' && e.payload.retryable === false);
  await assert.rejects(tools.call('nothing', '{}', { sessionId: 's', callId: 'c' }), (e) => e.payload.code === 'unknown_tool');
});
