// Browser test of the demo client's messages tab: a direct conversation
// kept live both ways (unread badge, new messages, "Seen", edits and
// deletions), a group of three, and a refusal once the recipient takes
// messages from nobody, against a real Herald server on 127.0.0.1 in
// Debian's Chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { TIMEOUT, foreignRequests, gql, recordedContext, screenshot, signUp, startAll, stopAll, uniqueHandle } from './harness.mjs';

let env;
let dir;
let server;
let browser;

before(async () => {
  env = await startAll();
  ({ dir, server, browser } = env);
});

after(() => stopAll(env));

async function open(rec, user, hash) {
  const page = await rec.context.newPage();
  await page.addInitScript((t) => localStorage.setItem('herald.token', t), user.token);
  await page.goto(`${server.base}/app/${hash}`);
  // The conversation events' subscription is up: nothing sent from now on is missed.
  await page.locator('[data-testid="tab-messages"][data-live="live"]').waitFor();
  return page;
}

test('demo client: direct messages live both ways, a group of three, and a refusal', async () => {
  const recA = await recordedContext(browser);
  const recB = await recordedContext(browser);
  try {
    const ann = await signUp(server.base, uniqueHandle('ann'));
    const bob = await signUp(server.base, uniqueHandle('bob'));
    const cat = await signUp(server.base, uniqueHandle('cat'));
    const a = await open(recA, ann, `#/u/${bob.handle}`);
    const b = await open(recB, bob, '#/home');

    // Ann messages Bob from his profile.
    await a.getByTestId('message-user').click();
    await a.getByTestId('composer').fill('hi bob');
    await a.getByTestId('composer').press('Enter');
    await a.getByTestId('conversation').waitFor();
    await a.getByTestId('chat-message').filter({ hasText: 'hi bob' }).waitFor();

    // Bob sees the unread badge live, then the conversation in his list.
    await b.getByTestId('msg-badge').filter({ hasText: /^1$/ }).waitFor({ timeout: TIMEOUT.event });
    await b.getByTestId('tab-messages').click();
    const row = b.getByTestId('conversation-row').filter({ hasText: ann.handle });
    await row.filter({ hasText: 'hi bob' }).waitFor();
    await row.getByTestId('conversation-unread').filter({ hasText: '1' }).waitFor();
    await screenshot(b, dir, 'app-messages-list');

    // A second message reaches Bob's list live.
    await a.getByTestId('composer').fill('are you there?');
    await a.getByTestId('composer').press('Enter');
    await row.getByTestId('conversation-unread').filter({ hasText: '2' }).waitFor({ timeout: TIMEOUT.event });
    await row.filter({ hasText: 'are you there?' }).waitFor();

    // Bob opens it: it is read, and Ann sees "Seen".
    await row.click();
    await b.getByTestId('chat-message').filter({ hasText: 'are you there?' }).waitFor();
    await b.getByTestId('msg-badge').waitFor({ state: 'hidden', timeout: TIMEOUT.event });
    await a.getByTestId('seen').filter({ hasText: /^Seen$/ }).waitFor({ timeout: TIMEOUT.event });

    // New messages while it is open show at once, both ways.
    await b.getByTestId('composer').fill('yes, here');
    await b.getByTestId('composer').press('Enter');
    await a.getByTestId('chat-message').filter({ hasText: 'yes, here' }).waitFor({ timeout: TIMEOUT.event });
    await screenshot(a, dir, 'app-messages-seen');

    // Ann edits her first message, then deletes the second.
    const first = a.getByTestId('chat-message').filter({ hasText: 'hi bob' });
    await first.getByTestId('chat-edit').click();
    await a.getByTestId('chat-edit-input').fill('hi bob, edited');
    await a.getByTestId('chat-edit-input').press('Enter');
    await a.getByTestId('chat-message').filter({ hasText: 'hi bob, edited' }).getByTestId('chat-edited').waitFor();
    await b.getByTestId('chat-message').filter({ hasText: 'hi bob, edited' }).waitFor({ timeout: TIMEOUT.event });
    await a.getByTestId('chat-message').filter({ hasText: 'are you there?' }).getByTestId('chat-delete').click();
    await a.getByTestId('dialog-confirm').click();
    await a.getByTestId('chat-message').filter({ hasText: 'message deleted' }).waitFor();
    await b.getByTestId('chat-message').filter({ hasText: 'message deleted' }).waitFor({ timeout: TIMEOUT.event });
    assert.equal(await b.getByTestId('chat-message').filter({ hasText: 'are you there?' }).count(), 0, 'the deleted text is gone on Bob\'s side');
    await screenshot(b, dir, 'app-messages-edited-deleted');

    // A group of three: Ann's message reaches Bob live and Cat.
    await b.getByTestId('messages-back').click();
    await a.goto(`${server.base}/app/#/messages/group`);
    await a.getByTestId('group-name').fill('Trio');
    for (const u of [bob, cat]) {
      await a.getByTestId('user-picker').fill(u.handle);
      await a.locator(`[data-testid="picker-result"][data-handle="${u.handle}"]`).click();
      await a.locator(`[data-testid="group-member"][data-handle="${u.handle}"]`).waitFor();
    }
    await a.getByTestId('group-create').click();
    await a.getByTestId('conversation-title').filter({ hasText: 'Trio' }).waitFor();
    await a.getByTestId('composer').fill('hello trio');
    await a.getByTestId('composer').press('Enter');
    await a.getByTestId('chat-message').filter({ hasText: 'hello trio' }).waitFor();
    await a.getByTestId('members-toggle').click();
    assert.equal(await a.getByTestId('member').count(), 3);
    const group = b.getByTestId('conversation-row').filter({ hasText: 'Trio' });
    await group.filter({ hasText: 'hello trio' }).waitFor({ timeout: TIMEOUT.event });
    const d = await gql(server.base, cat.token, '{ conversations(first: 5) { edges { node { name lastMessage { text } } } } conversationsUnreadCount }');
    assert.equal(d.conversations.edges[0].node.name, 'Trio');
    assert.equal(d.conversations.edges[0].node.lastMessage.text, 'hello trio');
    assert.equal(d.conversationsUnreadCount, 1);
    await screenshot(a, dir, 'app-messages-group');
    await group.click();
    await b.getByTestId('chat-message').filter({ hasText: 'hello trio' }).waitFor();
    await screenshot(b, dir, 'app-messages-group-member');

    // Membership changes show live: Ann (the admin) removes Cat, then Bob leaves.
    await b.getByTestId('members-toggle').click();
    await b.getByTestId('member').nth(2).waitFor();
    await a.locator(`[data-testid="member"][data-id="${cat.id}"]`).getByTestId('member-remove').click();
    await a.getByTestId('dialog-confirm').click();
    await b.locator(`[data-testid="member"][data-id="${cat.id}"]`).waitFor({ state: 'detached', timeout: TIMEOUT.event });
    assert.equal(await b.getByTestId('member').count(), 2);
    assert.equal(await b.getByTestId('member-remove').count(), 0, 'only admins remove members');
    await b.getByTestId('leave-group').click();
    await b.getByTestId('dialog-confirm').click();
    await b.getByTestId('new-message').waitFor();
    await a.getByText('1 member', { exact: true }).waitFor({ timeout: TIMEOUT.event });
    assert.equal(await b.getByTestId('conversation-row').filter({ hasText: 'Trio' }).count(), 0, 'a group left leaves the list');

    // Bob starts a conversation from the Messages tab, finding Cat by typing.
    await b.getByTestId('new-message').click();
    await b.getByTestId('user-picker').fill(cat.handle);
    await b.locator(`[data-testid="picker-result"][data-handle="${cat.handle}"]`).click();
    await b.getByTestId('composer').fill('hi cat');
    await b.getByTestId('composer').press('Enter');
    await b.getByTestId('conversation').waitFor();
    await b.getByTestId('chat-message').filter({ hasText: 'hi cat' }).waitFor();

    // Bob takes messages from nobody: Ann's next one is refused, and says so.
    await b.getByTestId('tab-settings').click();
    await b.getByTestId('messages-from-nobody').check();
    await b.getByTestId('notice').filter({ hasText: 'nobody' }).waitFor();
    await screenshot(b, dir, 'app-messages-settings');
    await a.goto(`${server.base}/app/#/messages/to/${bob.handle}`);
    await a.getByTestId('chat-message').filter({ hasText: 'yes, here' }).waitFor();
    await a.getByTestId('composer').fill('still there?');
    await a.getByTestId('composer').press('Enter');
    const refused = a.locator('[data-testid="composer-error"][data-code="FORBIDDEN"]');
    await refused.waitFor();
    assert.match(await refused.textContent(), /^Not sent: /);
    assert.equal(await a.getByTestId('composer').inputValue(), 'still there?', 'the refused text stays to send later');
    await screenshot(a, dir, 'app-messages-refused');

    // A long history: the newest page first, older ones on demand, above.
    // The 35 messages' live events may still be arriving when Ann opens
    // the conversation (a slow machine): she waits, as a user would, for
    // the tab's badge to count them, then for it to clear once the
    // conversation is open and read. Late events then change nothing
    // shown: one older than the page shown is left to "Load older".
    for (let i = 1; i <= 35; i++) await gql(server.base, cat.token, 'mutation($to: ID!, $t: String!) { sendDirectMessage(to: $to, text: $t) { id } }', { to: ann.id, t: `cat says ${i}` });
    await a.goto(`${server.base}/app/#/messages`);
    await a.getByTestId('msg-badge').filter({ hasText: /^35$/ }).waitFor({ timeout: TIMEOUT.event });
    await a.getByTestId('conversation-row').first().filter({ hasText: 'cat says 35' }).click();
    await a.getByTestId('chat-message').filter({ hasText: 'cat says 35' }).waitFor();
    await a.getByTestId('msg-badge').waitFor({ state: 'hidden', timeout: TIMEOUT.event });
    assert.equal(await a.getByTestId('chat-message').count(), 30, 'the newest 30 first');
    await a.getByTestId('chat-older').click();
    await a.getByTestId('chat-message').nth(34).waitFor();
    assert.equal(await a.getByTestId('chat-message').count(), 35);
    assert.equal(await a.getByTestId('chat-text').first().textContent(), 'cat says 1');
    await a.getByTestId('chat-older').waitFor({ state: 'hidden' });
    const seqs = await a.getByTestId('chat-message').evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
    assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y), 'oldest at the top, newest at the bottom');
    await a.setViewportSize({ width: 390, height: 760 });
    await screenshot(a, dir, 'app-messages-phone', false);
  } finally {
    await recA.context.close();
    await recB.context.close();
  }
  for (const rec of [recA, recB]) {
    assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
    assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
  }
});
