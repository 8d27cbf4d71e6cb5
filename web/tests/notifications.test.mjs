// Browser test of the demo client's notifications: a live group of likes,
// mark read, and a follow on top, against a real Herald server on
// 127.0.0.1 in Debian's Chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  TIMEOUT,
  foreignRequests,
  gql,
  recordedContext,
  screenshot,
  signUp,
  startAll,
  stopAll,
  uniqueHandle,
} from './harness.mjs';

let env;
let dir;
let server;
let browser;

before(async () => {
  env = await startAll();
  ({ dir, server, browser } = env);
});

after(() => stopAll(env));

test('demo client: notifications group live, mark read, and a follow moves to the top', async () => {
  const rec = await recordedContext(browser);
  try {
    const ann = await signUp(server.base, uniqueHandle('ann'));
    const bob = await signUp(server.base, uniqueHandle('bob'));
    const cat = await signUp(server.base, uniqueHandle('cat'));
    const { postMessage: post } = await gql(server.base, ann.token, 'mutation { postMessage(input: {text: "like me"}) { id } }');
    const page = await rec.context.newPage();
    await page.addInitScript((t) => localStorage.setItem('herald.token', t), ann.token);
    await page.goto(`${server.base}/app/`);
    await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
    await page.getByTestId('tab-notifications').click();
    await page.getByTestId('empty').filter({ hasText: 'No notifications yet' }).waitFor();

    const items = page.getByTestId('notification');
    const like = 'mutation($id: ID!) { like(messageId: $id) { id } }';
    await gql(server.base, bob.token, like, { id: post.id });
    await items.filter({ hasText: `${bob.handle} liked your post` }).waitFor({ timeout: TIMEOUT.event });
    await gql(server.base, cat.token, like, { id: post.id });
    await items.filter({ hasText: `${cat.handle} and 1 other liked your post` }).waitFor({ timeout: TIMEOUT.event });
    assert.equal(await items.count(), 1, 'two likes of one message are one group');
    await page.getByTestId('notif-badge').filter({ hasText: /^1$/ }).waitFor();
    await screenshot(page, dir, 'app-notifications');

    await page.getByTestId('notif-mark-read').click();
    await page.getByTestId('notif-badge').waitFor({ state: 'hidden' });
    assert.equal(await page.locator('[data-testid="notification"].unread').count(), 0, 'no unread marker after mark read');

    await gql(server.base, bob.token, 'mutation($id: ID!) { follow(userId: $id) { id } }', { id: ann.id });
    await items.first().filter({ hasText: `${bob.handle} followed you` }).waitFor({ timeout: TIMEOUT.event });
    await page.getByTestId('notif-badge').filter({ hasText: /^1$/ }).waitFor();
    assert.equal(await items.count(), 2);
    assert.equal(await page.locator('[data-testid="notification"].unread').count(), 1, 'the follow is marked unread');
    await screenshot(page, dir, 'app-notifications-2-follow');
  } finally {
    await rec.context.close();
  }
  assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
  assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
});
