// A Relay client of the home timeline against a real Herald server, in
// Debian's Chromium: relay-compiler compiles tests/relay/relayInbox.js's
// operations against schema.graphqls, Vite bundles it with relay-runtime and
// graphql-ws into one script, and the script runs in a page of the server's
// origin. The test then checks, through the Relay store alone, that the
// inboxEvents subscription keeps the inbox connection right with no
// updater: ADDED (also twice), EDITED, DELETED and REMOVED.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { build } from 'vite';

import { TIMEOUT, artifactsDir, deadline, foreignRequests, gql, launchBrowser, recordedContext, signUp, startServer, uniqueHandle, until } from './harness.mjs';

const web = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const FOLLOW = 'mutation($id: ID!) { follow(userId: $id) { id } }';
const POST = 'mutation($t: String!) { postMessage(input: {text: $t}) { id } }';
const EDIT = 'mutation($id: ID!, $t: String!) { editMessage(id: $id, text: $t) { id } }';
const DELETE = 'mutation($id: ID!) { deleteMessage(id: $id) }';
const INBOX = 'query { inbox(first: 20) { totalCount unreadCount edges { cursor deliveredAt node { id } } } }';

// The warning relay-runtime's development build logs for each event whose
// `edge` is null (every type but ADDED): @prependEdge's handler runs on
// every payload of the subscription. Harmless, and the only console error
// the page may log.
const NULL_EDGE_WARNING = 'MutationHandlers: Expected the server edge to be non-null.';

// graphqlTags is a Vite plugin doing what babel-plugin-relay does: each
// graphql tag becomes an import of the artifact relay-compiler wrote for
// the operation it names.
function graphqlTags() {
  return {
    name: 'relay-graphql-tags',
    transform(code, id) {
      if (id.includes('/node_modules/') || !code.includes('graphql`')) return null;
      const imports = [];
      const out = code.replace(/\bgraphql`([^`]*)`/g, (_, text) => {
        const name = /\b(?:query|mutation|subscription|fragment)\s+(\w+)/.exec(text)?.[1];
        if (!name) throw new Error(`a graphql tag without an operation name in ${id}`);
        imports.push(`import ${name} from './__generated__/${name}.graphql.js';`);
        return name;
      });
      return { code: `${imports.join('\n')}\n${out}`, map: null };
    },
  };
}

// buildScript compiles the Relay operations and bundles the client into one
// script under <artifacts>/relay (the compiled artifacts stay there to be
// read), and returns the script. The compiler reads the schema as
// schema.graphql: it ignores a schema file named otherwise
// (schema.graphqls), failing with "'Query' root type must be provided".
async function buildScript(artifacts) {
  const dir = join(artifacts, 'relay');
  await rm(dir, { recursive: true, force: true }); // from an earlier run into $HERALD_ARTIFACTS
  await mkdir(join(dir, 'src/__generated__'), { recursive: true });
  await copyFile(join(web, 'tests/relay/relayInbox.js'), join(dir, 'src/relayInbox.js'));
  await copyFile(join(web, '../schema.graphqls'), join(dir, 'schema.graphql'));
  await symlink(join(web, 'node_modules'), join(dir, 'node_modules'));
  const config = { src: './src', schema: './schema.graphql', language: 'javascript', artifactDirectory: './src/__generated__', eagerEsModules: true };
  await writeFile(join(dir, 'relay.config.json'), JSON.stringify(config));
  await deadline(
    promisify(execFile)(join(web, 'node_modules/.bin/relay-compiler'), ['--noWatchman'], { cwd: dir }),
    TIMEOUT.build,
    'relay-compiler',
  );
  await deadline(
    build({
      root: dir,
      configFile: false,
      logLevel: 'warn',
      mode: 'development',
      // relay-runtime's development build: its invariants and warnings on.
      define: { 'process.env.NODE_ENV': '"development"' },
      plugins: [graphqlTags()],
      build: {
        outDir: join(dir, 'dist'),
        emptyOutDir: true,
        minify: false,
        target: 'es2022',
        lib: { entry: join(dir, 'src/relayInbox.js'), formats: ['iife'], name: 'relayInboxBundle', fileName: () => 'relayInbox.js' },
      },
    }),
    TIMEOUT.build,
    'the Vite build of the Relay page',
  );
  return readFile(join(dir, 'dist/relayInbox.js'), 'utf8');
}

let dir;
let server;
let browser;
let script;

before(async () => {
  dir = await artifactsDir();
  console.log(`artifacts: ${dir}`);
  // Both at once; the server is kept even if the page fails to build, so
  // that after() stops it.
  const [started, built] = await Promise.allSettled([startServer(dir), buildScript(dir)]);
  server = started.value;
  for (const r of [started, built]) if (r.status === 'rejected') throw r.reason;
  script = built.value;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  const exit = await server?.stop();
  if (exit) assert.equal(exit.code, 0, `server exit ${JSON.stringify(exit)}; log in ${dir}/server.log`);
});

// openClient returns the test's handle on window.relayInbox in tab: each
// method runs in the page. eventsFor and waitLive wait (bounded) for events
// on every one of the n subscriptions start opened.
function openClient(tab, consoleErrors) {
  let subscriptions = 0;
  const c = {
    async start(token, n) {
      subscriptions = n;
      return deadline(tab.evaluate(([t, n]) => window.relayInbox.start(t, n), [token, n]), TIMEOUT.ui, 'the Relay query');
    },
    snapshot: (ids = []) => tab.evaluate((ids) => window.relayInbox.snapshot(ids), ids),
    events: () => tab.evaluate(() => window.relayInbox.events()),
    errors: () => tab.evaluate(() => window.relayInbox.errors()),
    commit: (name, variables) => deadline(tab.evaluate(([n, v]) => window.relayInbox.commit(n, v), [name, variables]), TIMEOUT.ui, `the ${name} mutation`),
    stop: () => tab.evaluate(() => window.relayInbox.stop()),
    describe: async () => JSON.stringify({ events: await c.events(), errors: await c.errors(), consoleErrors }),
    // eventsFor waits until each subscription delivered an event of type
    // about message id, and returns them.
    async eventsFor(type, id) {
      const about = (e) => e.type === type && [e.edge?.node?.id, e.message?.id, e.deletedMessageId, e.removedMessageId].includes(id);
      return until(
        async () => {
          const got = (await c.events()).filter(about);
          return new Set(got.map((e) => e.subscription)).size === subscriptions && got;
        },
        TIMEOUT.event,
        `a ${type} event for ${id} on ${subscriptions} subscriptions`,
        c.describe,
      );
    },
    // waitLive marks the inbox read (a Relay mutation) until each
    // subscription has seen READ, which tells that the server registered
    // them all: an event published before would not reach them.
    async waitLive() {
      await until(
        async () => {
          await c.commit('markRead');
          const read = (await c.events()).filter((e) => e.type === 'READ');
          return new Set(read.map((e) => e.subscription)).size === subscriptions;
        },
        TIMEOUT.event,
        `a READ event on ${subscriptions} subscriptions`,
        c.describe,
      );
    },
  };
  return c;
}

// withClient runs f with a Relay client in a fresh recorded browser context,
// then fails if the page requested another host, threw, or logged an error
// other than relay-runtime's warning for a null edge.
async function withClient(f) {
  const rec = await recordedContext(browser);
  const consoleErrors = [];
  try {
    // The client runs in a page of the server's own origin (its /healthz),
    // so that /graphql and its websocket are same-origin, as for the demo
    // client. (A page that the test fulfilled itself would have no address:
    // Chromium then blocks its websocket to 127.0.0.1 as a local network
    // access, ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS.)
    const tab = await rec.context.newPage();
    tab.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(`${m.text()} (${m.location().url})`);
    });
    await tab.goto(`${server.base}/healthz`);
    await tab.addScriptTag({ content: script });
    await tab.waitForFunction(() => window.relayInbox !== undefined);
    const client = openClient(tab, consoleErrors);
    await f(client);
    assert.deepEqual(await client.errors(), [], 'subscription errors');
    await client.stop();
  } finally {
    await rec.context.close();
  }
  assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
  assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
  // Chromium asks /healthz's origin for /favicon.ico, which is a 404.
  const unexpected = consoleErrors.filter((m) => !m.includes(NULL_EDGE_WARNING) && !m.endsWith('/favicon.ico)'));
  assert.deepEqual(unexpected, [], 'console errors other than relay-runtime’s warning for a null edge');
  console.log(`relay-runtime warned of a null edge ${consoleErrors.filter((m) => m.includes(NULL_EDGE_WARNING)).length} times`);
}

const nodeIDs = (s) => s.edges.map((e) => e.node?.id ?? null);

// users signs up a reader and n authors whom the reader follows.
async function users(n) {
  const reader = await signUp(server.base, uniqueHandle('reader'));
  const authors = [];
  for (let i = 0; i < n; i++) authors.push(await signUp(server.base, uniqueHandle('author')));
  return { reader, authors, inbox: async () => (await gql(server.base, reader.token, INBOX)).inbox };
}

const post = async (author, text) => (await gql(server.base, author.token, POST, { t: text })).postMessage.id;

test('a Relay store keeps the inbox connection from inboxEvents alone', async () => {
  const { reader, authors: [author], inbox: serverInbox } = await users(1);
  await gql(server.base, reader.token, FOLLOW, { id: author.id });
  const first = await post(author, 'first post');
  await until(async () => (await serverInbox()).edges.length === 1, TIMEOUT.event, 'the first post in the reader’s inbox');

  await withClient(async (client) => {
    // The first page, loaded by the query; two subscriptions on one
    // environment, so that every event reaches the store twice.
    await client.start(reader.token, 2);
    let s = await client.snapshot();
    assert.equal(s.isMissingData, false);
    assert.deepEqual(nodeIDs(s), [first]);
    assert.equal(s.edges[0].cursor, (await serverInbox()).edges[0].cursor);
    assert.deepEqual([s.totalCount, s.unreadCount], [1, 1]);
    await client.waitLive();

    // ADDED: the new item is on top of the connection, with the server's
    // cursor and delivery time, once although it was applied twice.
    const second = await post(author, 'second post');
    const added = await client.eventsFor('ADDED', second);
    s = await client.snapshot();
    assert.deepEqual(nodeIDs(s), [second, first], 'the connection after a duplicated ADDED');
    const fresh = await serverInbox();
    assert.deepEqual(
      s.edges.map((e) => [e.node.id, e.cursor, e.deliveredAt]),
      fresh.edges.map((e) => [e.node.id, e.cursor, e.deliveredAt]),
      'the edges the events built are the ones the server pages',
    );
    assert.deepEqual(s.edges[0].node, { id: second, text: 'second post', editedAt: null, __typename: 'Message' });
    for (const e of added) {
      assert.deepEqual([e.message?.id, e.deletedMessageId, e.removedMessageId], [second, null, null]);
      assert.deepEqual([e.totalCount, e.unreadCount], [fresh.totalCount, fresh.unreadCount]);
    }
    // The counts ride on the event, not on the connection: no directive
    // copies them onto the connection record, which keeps the counts the
    // query read (an updater, or a refetch, would be needed).
    assert.deepEqual([s.totalCount, s.unreadCount], [1, 1], 'the connection’s counts');

    // EDITED: the message record of the same id takes the new text; the
    // connection is unchanged.
    await gql(server.base, author.token, EDIT, { id: second, t: 'second post, edited' });
    const edited = await client.eventsFor('EDITED', second);
    s = await client.snapshot();
    assert.deepEqual(nodeIDs(s), [second, first]);
    assert.equal(s.edges[0].node.text, 'second post, edited');
    assert.ok(s.edges[0].node.editedAt, 'editedAt is set');
    assert.equal(s.edges[0].node.editedAt, edited[0].message.editedAt);
    assert.deepEqual([edited[0].edge, edited[0].deletedMessageId, edited[0].removedMessageId], [null, null, null]);

    // DELETED: the edge leaves the connection and the record the store.
    await gql(server.base, author.token, DELETE, { id: second });
    const deleted = await client.eventsFor('DELETED', second);
    s = await client.snapshot([second, first]);
    assert.equal(s.isMissingData, false);
    assert.deepEqual(nodeIDs(s), [first], 'the connection after DELETED');
    assert.deepEqual(s.records, { [second]: 'deleted', [first]: 'present' });
    assert.deepEqual([deleted[0].edge, deleted[0].message, deleted[0].removedMessageId], [null, null, null]);

    // REMOVED: the reader unfollows (a Relay mutation, no updater); the
    // author's items leave the connection, their records stay.
    const third = await post(author, 'third post');
    await client.eventsFor('ADDED', third);
    assert.deepEqual(nodeIDs(await client.snapshot()), [third, first]);
    const unfollowed = await client.commit('unfollow', { id: author.id });
    assert.deepEqual(unfollowed.unfollow, { id: author.id, viewerFollows: false });
    const removed = [...(await client.eventsFor('REMOVED', third)), ...(await client.eventsFor('REMOVED', first))];
    s = await client.snapshot([third, first]);
    assert.deepEqual(nodeIDs(s), [], 'the connection after REMOVED');
    assert.deepEqual(s.records, { [third]: 'present', [first]: 'present' });
    for (const e of removed) assert.deepEqual([e.edge, e.deletedMessageId], [null, null]);
    assert.deepEqual((await serverInbox()).edges, []);
  });
});

// What @prependEdge cannot do: an item a follow backfills is older than
// what the inbox shows, and the server pages it below them, but its ADDED
// puts it on top. A client cannot place it by its cursor (cursors are
// opaque); it would need an updater that compares the nodes' createdAt, or
// a refetch. This test pins the behaviour, so that a change on either side
// is noticed.
test('a backfilled item is prepended by @prependEdge though the server pages it lower', async () => {
  const { reader, authors: [older, newer], inbox: serverInbox } = await users(2);
  const old = await post(older, 'an older post');
  await gql(server.base, reader.token, FOLLOW, { id: newer.id });
  const recent = await post(newer, 'a newer post');
  await until(async () => (await serverInbox()).edges.length === 1, TIMEOUT.event, 'the newer post in the reader’s inbox');

  await withClient(async (client) => {
    await client.start(reader.token, 1);
    assert.deepEqual(nodeIDs(await client.snapshot()), [recent]);
    await client.waitLive();
    await gql(server.base, reader.token, FOLLOW, { id: older.id });
    const [added] = await client.eventsFor('ADDED', old);
    const fresh = await serverInbox();
    assert.deepEqual(
      fresh.edges.map((e) => e.node.id),
      [recent, old],
      'the server pages the backfilled post below the newer one',
    );
    assert.equal(added.edge.cursor, fresh.edges[1].cursor, 'the event carries the cursor the server pages it at');
    assert.deepEqual(nodeIDs(await client.snapshot()), [old, recent], 'Relay’s connection after the backfill’s ADDED');
  });
});
