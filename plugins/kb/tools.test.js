// The kb plugin's own tests, in Node.js against a stand-in docs API:
// `node --test` in plugins/kb. The host's integration tests run the built
// component against the real demo upstream.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FakeHost } from '../sdk-js/testing.js';
import { PAGE_CHARS, plugin } from './tools.js';

const ARTICLES = [
  { id: 'battery', title: 'Battery life', section: 'Operation', updated: '2026-09-14', body: 'The cell lasts about 18 months. '.repeat(3) },
  { id: 'installation', title: 'Installing the TW-2', section: 'Setup', updated: '2026-10-02', body: 'Mount the bracket. '.repeat(200) },
];

let requests = 0;
globalThis.fetch = async (url) => {
  requests += 1;
  if (url === 'http://docs.test/articles?full=1') return new Response(JSON.stringify({ articles: ARTICLES }), { status: 200 });
  const one = ARTICLES.find((a) => url === `http://docs.test/articles/${a.id}`);
  if (one) return new Response(JSON.stringify(one), { status: 200 });
  assert.match(url, /^http:\/\/docs\.test\/articles\/[a-z0-9-]+$/);
  return new Response('{"error": "not_found"}', { status: 404 });
};

const host = () => new FakeHost({ config: { base_url: 'http://docs.test/' } });

test('search returns short rows with total and rest', async () => {
  const found = await host().call(plugin, 'kb_article_search', { query: 'battery cell', limit: 1 });
  assert.equal(found.total, 1);
  assert.equal(found.rest, 0);
  assert.equal(found.rows[0].id, 'battery');
  assert.ok(found.rows[0].snippet.length <= 162);
});

test('read pages a long article', async () => {
  const first = await host().call(plugin, 'kb_article_read', { id: 'installation' });
  assert.equal(first.text.length, PAGE_CHARS);
  assert.equal(first.pages, Math.ceil(ARTICLES[1].body.length / PAGE_CHARS));
  assert.equal(first.rest, first.pages - 1);
  await assert.rejects(host().call(plugin, 'kb_article_read', { id: 'installation', page: 9 }), { code: 'no_such_page' });
  await assert.rejects(host().call(plugin, 'kb_article_read', { id: 'nothing' }), { code: 'not_found' });
});

test('hostile arguments are refused before any request', async () => {
  const before = requests;
  await assert.rejects(host().call(plugin, 'kb_article_read', { id: '../billing' }), { code: 'invalid_arguments' });
  await assert.rejects(host().call(plugin, 'kb_article_search', { query: 'x', limit: 1000 }), { code: 'invalid_arguments' });
  assert.equal(requests, before);
});
