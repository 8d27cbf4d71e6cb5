// Browser test of the demo client's live feed when the server ends a
// subscription on an open connection, as it does with a subscriber that
// falls too far behind: the client subscribes again after the last event
// it received, and nothing posted meanwhile is missed. Against a real
// Herald server on 127.0.0.1 in Debian's Chromium; the test stands between
// the page and the server on the websocket, to speak as the server.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { TIMEOUT, foreignRequests, gql, recordedContext, signUp, startAll, stopAll, until, uniqueHandle } from './harness.mjs';

let env;
let server;
let browser;

before(async () => {
  env = await startAll();
  ({ server, browser } = env);
});

after(() => stopAll(env));

const FOLLOW = 'mutation($id: ID!) { follow(userId: $id) { id } }';
const POST = 'mutation($t: String!) { postMessage(input: {text: $t}) { id } }';

test('demo client: a subscription the server ends is taken up again after its last event, none missed', async () => {
  const rec = await recordedContext(browser);
  try {
    const me = await signUp(server.base, uniqueHandle('liv'));
    const friend = await signUp(server.base, uniqueHandle('fri'));
    await gql(server.base, me.token, FOLLOW, { id: friend.id });

    // The home feed's socket: what the page subscribed with, and the
    // cursor of each inboxEvents event the server sent.
    const home = { route: null, server: null, subscribes: [], cursors: [] };
    const page = await rec.context.newPage();
    await page.routeWebSocket(/\/graphql$/, (ws) => {
      const srv = ws.connectToServer();
      let feed = false;
      ws.onMessage((m) => {
        const msg = JSON.parse(m);
        if (msg.type === 'subscribe' && msg.payload.query.includes('inboxEvents')) {
          feed = true;
          home.route = ws;
          home.server = srv;
          home.subscribes.push(msg);
        }
        srv.send(m);
      });
      srv.onMessage((m) => {
        const msg = JSON.parse(m);
        if (feed && msg.type === 'next' && msg.payload.data?.inboxEvents) home.cursors.push(msg.payload.data.inboxEvents.cursor);
        ws.send(m);
      });
    });
    await page.addInitScript((t) => localStorage.setItem('herald.token', t), me.token);
    await page.goto(`${server.base}/app/`);
    await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
    await until(() => home.subscribes.length === 1, TIMEOUT.ui, 'the home feed subscribed');

    const items = page.getByTestId('inbox-item');
    await gql(server.base, friend.token, POST, { t: 'first, live' });
    await items.filter({ hasText: 'first, live' }).waitFor({ timeout: TIMEOUT.event });
    await until(() => home.cursors.length >= 1, TIMEOUT.ui, 'the event passed the test');
    const last = home.cursors.at(-1);

    // The server ends the subscription, its connection open: the test
    // completes it on both sides, as a server dropping a slow subscriber
    // does. Then a post made before the client subscribes again.
    const { id } = home.subscribes[0];
    home.server.send(JSON.stringify({ id, type: 'complete' }));
    home.route.send(JSON.stringify({ id, type: 'complete' }));
    await gql(server.base, friend.token, POST, { t: 'second, while not subscribed' });

    await until(() => home.subscribes.length === 2, TIMEOUT.event, 'the client subscribed again');
    assert.equal(home.subscribes[1].payload.variables.after, last, 'again after the last event it received');
    assert.notEqual(home.subscribes[1].id, id);
    await items.filter({ hasText: 'second, while not subscribed' }).waitFor({ timeout: TIMEOUT.event });
    await gql(server.base, friend.token, POST, { t: 'third, live again' });
    await items.filter({ hasText: 'third, live again' }).waitFor({ timeout: TIMEOUT.event });
    assert.equal(await items.filter({ hasText: 'second, while not subscribed' }).count(), 1, 'shown once');
    assert.equal(await page.getByTestId('live-status').textContent(), 'Live');
  } finally {
    await rec.context.close();
  }
  assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
  assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
});
