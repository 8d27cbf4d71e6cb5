// Browser tests of the demo client's account features of the new API:
// blocks and mutes from a profile's menu, a private account with its
// follow requests, the "Requested" follow button, password change, data
// export and account deletion, against a real Herald server on 127.0.0.1
// in Debian's Chromium. They need the resolvers of block, unblock, mute,
// unmute, setPrivate, approveFollow, rejectFollow, changePassword,
// deleteAccount, exportAccount and the User fields private,
// viewerRequestedFollow, viewerBlocks, viewerMutes, blocked, muted and
// followRequests, as schema.graphqls describes them.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';

import { TIMEOUT, foreignRequests, gql, recordedContext, screenshot, signUp, startAll, stopAll, uniqueHandle } from './harness.mjs';

const FOLLOW = 'mutation($id: ID!) { follow(userId: $id) { id } }';
const POST = 'mutation($t: String!) { postMessage(input: {text: $t}) { id } }';
const RELATION = 'query($h: String!) { user(handle: $h) { id private followerCount followingCount viewerFollows viewerRequestedFollow viewerBlocks viewerMutes } }';

let env;
let dir;
let server;
let browser;

before(async () => {
  env = await startAll();
  ({ dir, server, browser } = env);
});

after(() => stopAll(env));

async function withContext(f) {
  const rec = await recordedContext(browser);
  try {
    await f(rec.context);
  } finally {
    await rec.context.close();
  }
  assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
  assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
}

// signedIn opens the app signed in as user, on the home timeline, live.
async function signedIn(context, user) {
  const page = await context.newPage();
  await page.addInitScript((t) => localStorage.setItem('herald.token', t), user.token);
  await page.goto(`${server.base}/app/`);
  await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
  return page;
}

const go = (page, hash) => page.evaluate((h) => (location.hash = h), hash);

describe('demo client: account features', () => {
  test('mutes and blocks from a profile menu, and takes both back in settings', async () => {
    const ann = await signUp(server.base, uniqueHandle('ann'));
    const bob = await signUp(server.base, uniqueHandle('bob'));
    await gql(server.base, ann.token, FOLLOW, { id: bob.id });
    await gql(server.base, bob.token, FOLLOW, { id: ann.id });
    await gql(server.base, bob.token, POST, { t: 'from bob' });
    await withContext(async (context) => {
      const page = await signedIn(context, ann);
      const items = page.getByTestId('inbox-item');
      await items.filter({ hasText: 'from bob' }).waitFor();

      // Mute, asked first: bob's post leaves home; the profile says muted.
      await go(page, `#/u/${bob.handle}`);
      await page.getByTestId('profile-menu').click();
      await screenshot(page, dir, 'account-1-profile-menu', false);
      await page.getByTestId('menu-mute').click();
      await page.getByTestId('dialog').filter({ hasText: `Mute @${bob.handle}?` }).waitFor();
      await page.getByTestId('dialog-confirm').click();
      await page.getByTestId('notice').filter({ hasText: `@${bob.handle} is muted.` }).waitFor();
      await page.getByTestId('muted-badge').waitFor();
      let rel = (await gql(server.base, ann.token, RELATION, { h: bob.handle })).user;
      assert.equal(rel.viewerMutes, true);
      assert.equal(rel.viewerFollows, true, 'a mute keeps the follow');
      await page.getByTestId('tab-home').click();
      await items.filter({ hasText: 'from bob' }).waitFor({ state: 'detached', timeout: TIMEOUT.event });

      // Settings lists the mute; Unmute takes it back.
      await page.getByTestId('tab-settings').click();
      const muted = page.getByTestId('muted-list').getByTestId('muted-row').filter({ hasText: `@${bob.handle}` });
      await muted.waitFor();
      await muted.getByTestId('row-unmute').click();
      await page.getByTestId('settings-muted').getByTestId('empty').filter({ hasText: "You haven't muted anyone." }).waitFor();
      rel = (await gql(server.base, ann.token, RELATION, { h: bob.handle })).user;
      assert.equal(rel.viewerMutes, false);

      // Block, asked first: the follows both ways end, and the profile
      // offers Unblock instead of Follow.
      await go(page, `#/u/${bob.handle}`);
      await page.getByTestId('profile-menu').click();
      await page.getByTestId('menu-block').click();
      await page.getByTestId('dialog').filter({ hasText: `Block @${bob.handle}?` }).waitFor();
      await screenshot(page, dir, 'account-2-confirm-block', false);
      await page.getByTestId('dialog-confirm').click();
      await page.getByTestId('blocked-banner').waitFor();
      await page.getByTestId('unblock').waitFor();
      assert.equal(await page.getByTestId('follow-toggle').count(), 0, 'no follow button for a blocked user');
      await screenshot(page, dir, 'account-3-blocked-profile');
      rel = (await gql(server.base, ann.token, RELATION, { h: bob.handle })).user;
      assert.deepEqual([rel.viewerBlocks, rel.viewerFollows], [true, false]);
      const me = (await gql(server.base, ann.token, RELATION, { h: ann.handle })).user;
      assert.equal(me.followerCount, 0, 'bob no longer follows ann');

      // Settings lists the block; Unblock takes it back.
      await page.getByTestId('tab-settings').click();
      const blocked = page.getByTestId('blocked-list').getByTestId('blocked-row').filter({ hasText: `@${bob.handle}` });
      await blocked.waitFor();
      await screenshot(page, dir, 'account-4-settings-blocked');
      await blocked.getByTestId('row-unblock').click();
      await page.getByTestId('settings-blocked').getByTestId('empty').filter({ hasText: "You haven't blocked anyone." }).waitFor();
      rel = (await gql(server.base, ann.token, RELATION, { h: bob.handle })).user;
      assert.deepEqual([rel.viewerBlocks, rel.viewerFollows], [false, false], 'follows removed by a block stay removed');
    });
  });

  test('a private account approves a follow request; following a private account shows Requested', async () => {
    const cat = await signUp(server.base, uniqueHandle('cat'));
    const dan = await signUp(server.base, uniqueHandle('dan'));
    const fay = await signUp(server.base, uniqueHandle('fay'));
    await gql(server.base, fay.token, 'mutation { setPrivate(private: true) { id } }');
    await withContext(async (context) => {
      const page = await signedIn(context, cat);

      // Cat makes her account private in settings.
      await page.getByTestId('tab-settings').click();
      const toggle = page.getByTestId('private-toggle');
      await toggle.waitFor();
      await page.locator('[data-testid="private-toggle"]:not([disabled])').waitFor();
      assert.equal(await toggle.isChecked(), false);
      await toggle.check();
      await page.getByTestId('notice').filter({ hasText: 'Your account is private' }).waitFor();
      assert.equal((await gql(server.base, cat.token, RELATION, { h: cat.handle })).user.private, true);

      // Dan's follow is a request: a notification, and a row to answer.
      await gql(server.base, dan.token, FOLLOW, { id: cat.id });
      const asked = (await gql(server.base, dan.token, RELATION, { h: cat.handle })).user;
      assert.deepEqual([asked.viewerFollows, asked.viewerRequestedFollow], [false, true]);
      await page.getByTestId('tab-notifications').click();
      await page.getByTestId('notification').filter({ hasText: `${dan.handle} asked to follow you` }).waitFor({ timeout: TIMEOUT.event });
      await page.getByTestId('notif-badge').filter({ hasText: /^1$/ }).waitFor();
      await screenshot(page, dir, 'account-5-follow-request-notification');

      await page.getByTestId('tab-settings').click();
      const request = page.getByTestId('follow-requests').getByTestId('follow-request').filter({ hasText: `@${dan.handle}` });
      await request.waitFor();
      await screenshot(page, dir, 'account-6-follow-requests');
      await request.getByTestId('request-approve').click();
      await page.getByTestId('notice').filter({ hasText: `@${dan.handle} now follows you.` }).waitFor();
      await request.waitFor({ state: 'detached' });
      const approved = (await gql(server.base, dan.token, RELATION, { h: cat.handle })).user;
      assert.deepEqual([approved.viewerFollows, approved.viewerRequestedFollow, approved.followerCount], [true, false, 1]);

      // Following a private account asks: the button says Requested.
      await go(page, `#/u/${fay.handle}`);
      await page.getByTestId('private-badge').waitFor();
      await page.getByTestId('empty').filter({ hasText: 'These posts are protected' }).waitFor();
      await page.getByTestId('follow-toggle').filter({ hasText: /^Follow$/ }).click();
      await page.getByTestId('follow-toggle').filter({ hasText: /^Requested$/ }).waitFor();
      await screenshot(page, dir, 'account-7-requested');
      const requested = (await gql(server.base, cat.token, RELATION, { h: fay.handle })).user;
      assert.deepEqual([requested.viewerFollows, requested.viewerRequestedFollow], [false, true]);
      const { viewer } = await gql(server.base, fay.token, '{ viewer { followRequests(first: 5) { edges { node { handle } } } } }');
      assert.deepEqual(viewer.followRequests.edges.map((e) => e.node.handle), [cat.handle]);
    });
  });

  test('changes the password, downloads the data, and deletes the account', async () => {
    const gil = await signUp(server.base, uniqueHandle('gil'));
    await gql(server.base, gil.token, POST, { t: 'my only post' });
    await withContext(async (context) => {
      const page = await signedIn(context, gil);
      await page.getByTestId('tab-settings').click();

      // A wrong current password is explained by the form.
      await page.getByTestId('old-password').fill('not my password');
      await page.getByTestId('new-password').fill('correct horse 2');
      await page.getByTestId('new-password-again').fill('correct horse 2');
      await page.getByTestId('change-password').click();
      await page.getByTestId('password-error').filter({ hasText: 'Your current password is not right.' }).waitFor();

      await page.getByTestId('old-password').fill('correct horse');
      await page.getByTestId('change-password').click();
      await page.getByTestId('notice').filter({ hasText: 'Password changed' }).waitFor();
      // This session goes on; the new password logs in, the old does not.
      await gql(server.base, gil.token, '{ viewer { id } }');
      await gql(server.base, null, 'mutation($h: String!) { logIn(input: {handle: $h, password: "correct horse 2"}) { token } }', { h: gil.handle });
      await assert.rejects(gql(server.base, null, 'mutation($h: String!) { logIn(input: {handle: $h, password: "correct horse"}) { token } }', { h: gil.handle }), /UNAUTHENTICATED/);

      // Export downloads one JSON file of the account.
      const [download] = await Promise.all([page.waitForEvent('download', { timeout: TIMEOUT.ui }), page.getByTestId('export').click()]);
      assert.equal(download.suggestedFilename(), `herald-${gil.handle}.json`);
      const exported = JSON.parse(await readFile(await download.path(), 'utf8'));
      const text = JSON.stringify(exported);
      assert.ok(text.includes(gil.handle) && text.includes('my only post'), `the export holds the profile and the post: ${text.slice(0, 200)}`);
      await screenshot(page, dir, 'account-8-settings-after-export');

      // Deleting asks for the password; a wrong one deletes nothing.
      await page.getByTestId('delete-account').click();
      await page.getByTestId('dialog').filter({ hasText: 'Delete your account?' }).waitFor();
      await page.getByTestId('dialog-password').fill('wrong password');
      await screenshot(page, dir, 'account-9-confirm-delete', false);
      await page.getByTestId('dialog-confirm').click();
      await page.locator('[data-testid="error"][data-code="WRONG_PASSWORD"]').filter({ hasText: "That password isn't right" }).waitFor();
      await gql(server.base, gil.token, '{ viewer { id } }');

      await page.getByTestId('delete-account').click();
      await page.getByTestId('dialog-password').fill('correct horse 2');
      await page.getByTestId('dialog-confirm').click();
      await page.getByTestId('auth-form').waitFor();
      await page.getByTestId('notice').filter({ hasText: 'Your account was deleted' }).waitFor();
      await screenshot(page, dir, 'account-10-deleted');
      assert.equal(await page.evaluate(() => localStorage.getItem('herald.token')), null);
      await assert.rejects(gql(server.base, gil.token, '{ viewer { id } }'), /UNAUTHENTICATED/);
      const gone = await gql(server.base, null, 'query($h: String!) { user(handle: $h) { id } }', { h: gil.handle }).then((d) => d.user, (err) => (/NOT_FOUND/.test(String(err)) ? null : Promise.reject(err)));
      assert.equal(gone, null, 'the profile is gone');
    });
  });

  test('at phone width: a profile menu and settings fit', async () => {
    const hal = await signUp(server.base, uniqueHandle('hal'));
    const ivy = await signUp(server.base, uniqueHandle('ivy'));
    await withContext(async (context) => {
      const page = await signedIn(context, hal);
      await page.setViewportSize({ width: 390, height: 844 });
      await go(page, `#/u/${ivy.handle}`);
      await page.getByTestId('profile-menu').click();
      await page.getByTestId('menu-block').waitFor();
      await screenshot(page, dir, 'account-phone-1-menu', false);
      await page.getByTestId('tab-settings').click();
      await page.getByTestId('private-toggle').waitFor();
      await page.getByTestId('settings-blocked').getByTestId('empty').waitFor();
      await screenshot(page, dir, 'account-phone-2-settings');
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no sideways scroll');
    });
  });
});
