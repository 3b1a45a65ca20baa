// The kb plugin: the Tidenwächter TW-2 handbook the helpdesk answers from,
// written in JavaScript on the toolhost SDK. Search returns short rows in
// pages (`total`, `rest`); the full text comes only from the read tool,
// also in pages, so neither tool floods the model's context. The handbook
// lives in the back office's docs API, reached through the host's gate.
import { Plugin, ToolError, config, s } from '../sdk-js/toolhost.js';

export const plugin = new Plugin();

/** Characters of article text per page of `kb_article_read`. */
export const PAGE_CHARS = 1500;
/** Longest snippet in a search row. */
const SNIPPET_CHARS = 160;

const SECTIONS = ['Setup', 'Operation', 'Troubleshooting', 'Service', 'Billing'];

/** GETs `path` of the docs API; `undefined` for a 404. */
async function docs(path) {
  const base = config.require('base_url').replace(/\/+$/, '');
  let response;
  try {
    response = await fetch(`${base}${path}`);
  } catch (e) {
    throw new ToolError('docs_unavailable', `the handbook could not be reached (${e && e.message ? e.message : e}); try again later`, true);
  }
  if (response.status === 404) return undefined;
  if (response.status !== 200) {
    throw new ToolError('docs_unavailable', `the handbook answered ${response.status}; try again later`, response.status >= 500);
  }
  return response.json();
}

/** Every article with its text, for searching. */
async function articles() {
  const body = await docs('/articles?full=1');
  if (!body || !Array.isArray(body.articles)) throw new ToolError('docs_unavailable', 'the handbook sent no article list', true);
  return body.articles;
}

/** Lower-case words of 2 or more letters (Latin, with accents) or digits.
 * The engine has no Unicode property classes, hence the explicit ranges. */
function words(text) {
  return text.toLowerCase().match(/[a-z0-9\u00df-\u024f]{2,}/g) || [];
}

function count(haystack, word) {
  let n = 0;
  for (let at = haystack.indexOf(word); at !== -1; at = haystack.indexOf(word, at + word.length)) n += 1;
  return n;
}

/** Up to SNIPPET_CHARS of `body` around the first of `terms`, on one line. */
function snippet(body, terms) {
  const flat = body.replace(/\s+/g, ' ').trim();
  const lower = flat.toLowerCase();
  const at = Math.min(...terms.map((t) => lower.indexOf(t)).filter((i) => i >= 0), flat.length);
  const start = at === flat.length ? 0 : Math.max(0, at - 40);
  const piece = flat.slice(start, start + SNIPPET_CHARS);
  return (start > 0 ? '…' : '') + piece + (start + SNIPPET_CHARS < flat.length ? '…' : '');
}

const row = s.object({
  id: s.string({ maxLength: 40 }),
  title: s.string({ maxLength: 200 }),
  section: s.string({ maxLength: 40 }),
  snippet: s.string({ maxLength: SNIPPET_CHARS + 2 }),
});

plugin.tool({
  name: 'kb_article_search',
  title: 'Search the TW-2 handbook',
  description:
    'Searches the Tidenwächter TW-2 handbook (setup, operation, troubleshooting, service, billing) for words and ' +
    'returns short rows, best match first: id, title, section and a snippet. Pages with offset; total and rest say ' +
    'how many matched and how many are left. Read an article in full with kb_article_read. Changes nothing.',
  input: s.object({
    query: s.string({ minLength: 1, maxLength: 200 }).describe('words to look for, e.g. "battery life"'),
    section: s.string({ enum: SECTIONS }).optional().describe('only articles of this section'),
    limit: s.integer({ minimum: 1, maximum: 10 }).optional().describe('rows per page (default 5)'),
    offset: s.integer({ minimum: 0, maximum: 100 }).optional().describe('rows to skip (default 0)'),
  }),
  output: s.object({
    total: s.integer({ minimum: 0, maximum: 1000 }),
    rest: s.integer({ minimum: 0, maximum: 1000 }),
    rows: s.array(row, { maxItems: 10 }),
  }),
  async run(ctx, args) {
    const terms = [...new Set(words(args.query))].slice(0, 12);
    if (terms.length === 0) throw new ToolError('invalid_query', 'give at least one word of two or more letters or digits');
    const scored = [];
    for (const [order, a] of (await articles()).entries()) {
      if (args.section && a.section !== args.section) continue;
      const title = a.title.toLowerCase();
      const body = a.body.toLowerCase();
      const score = terms.reduce((sum, t) => sum + 3 * count(title, t) + count(body, t), 0);
      if (score > 0) scored.push({ a, score, order });
    }
    scored.sort((x, y) => y.score - x.score || x.order - y.order);
    const offset = args.offset ?? 0;
    const page = scored.slice(offset, offset + (args.limit ?? 5));
    return {
      total: scored.length,
      rest: Math.max(0, scored.length - offset - page.length),
      rows: page.map(({ a }) => ({ id: a.id, title: a.title, section: a.section, snippet: snippet(a.body, terms) })),
    };
  },
});

plugin.tool({
  name: 'kb_article_read',
  title: 'Read a TW-2 handbook article',
  description:
    'Returns the text of one handbook article by its id, as returned by kb_article_search, one page of up to ' +
    `${PAGE_CHARS} characters at a time; pages and rest say how many pages there are and how many follow. ` +
    'Changes nothing.',
  input: s.object({
    id: s.string({ maxLength: 40, pattern: '^[a-z0-9-]{1,40}$' }).describe("the article's id, as returned by kb_article_search"),
    page: s.integer({ minimum: 1, maximum: 50 }).optional().describe('which page (default 1)'),
  }),
  output: s.object({
    id: s.string({ maxLength: 40 }),
    title: s.string({ maxLength: 200 }),
    section: s.string({ maxLength: 40 }),
    updated: s.string({ maxLength: 10 }),
    page: s.integer({ minimum: 1, maximum: 50 }),
    pages: s.integer({ minimum: 1, maximum: 1000 }),
    rest: s.integer({ minimum: 0, maximum: 1000 }),
    text: s.string({ maxLength: PAGE_CHARS }),
  }),
  async run(ctx, args) {
    // The id is safe in a path: the schema allows only a-z, 0-9 and -.
    const found = await docs(`/articles/${args.id}`);
    if (!found) throw new ToolError('not_found', `there is no article ${args.id}; find ids with kb_article_search`);
    if (typeof found.body !== 'string') throw new ToolError('docs_unavailable', `the handbook sent article ${args.id} without its text`, true);
    const chars = [...found.body];
    const pages = Math.max(1, Math.ceil(chars.length / PAGE_CHARS));
    const page = args.page ?? 1;
    if (page > pages) throw new ToolError('no_such_page', `article ${args.id} has ${pages} page(s)`);
    return {
      id: found.id,
      title: found.title,
      section: found.section,
      updated: found.updated,
      page,
      pages,
      rest: pages - page,
      text: chars.slice((page - 1) * PAGE_CHARS, page * PAGE_CHARS).join(''),
    };
  },
});
