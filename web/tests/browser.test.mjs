// Browser tests of the playground (/) and the demo client (/app/) against a
// real Herald server on 127.0.0.1, in Debian's Chromium. Every request the
// pages make is recorded; one to any other host fails the test.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

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
  until,
} from './harness.mjs';

const FOLLOW = 'mutation($id: ID!) { follow(userId: $id) { id } }';
const POST = 'mutation($t: String!) { postMessage(input: {text: $t}) { id } }';

let env;
let dir;
let server;
let browser;

before(async () => {
  env = await startAll();
  ({ dir, server, browser } = env);
});

after(() => stopAll(env));

// withContext runs f in a fresh recorded browser context, then fails if any
// page requested another host or threw an uncaught error.
async function withContext(f) {
  const rec = await recordedContext(browser);
  try {
    await f(rec.context);
  } finally {
    await rec.context.close();
  }
  assert.deepEqual(foreignRequests(rec.urls, server.host), [], 'requests to hosts other than the server');
  assert.ok(rec.urls.length > 0, 'no request was recorded at all');
  assert.deepEqual(rec.pageErrors, [], 'uncaught errors in the page');
}

describe('playground at /', () => {
  // responseText is the result pane's text, as Monaco renders it.
  const responseText = async (page) => (await page.locator('.graphiql-response').innerText()).replace(/\s+/g, ' ');

  // run picks one operation of the example document from the run button's menu.
  async function run(page, name) {
    await page.locator('.graphiql-execute-button').click();
    await page.getByRole('menuitem', { name, exact: true }).click();
  }

  async function waitForResponse(page, what, ok) {
    await until(async () => ok(await responseText(page)), TIMEOUT.event, what, () => responseText(page));
  }

  test('runs the example operations, then a subscription with a pasted token', async () => {
    await withContext(async (context) => {
      const page = await context.newPage();
      const frames = [];
      page.on('websocket', (ws) => {
        ws.on('framesent', (f) => frames.push(JSON.parse(f.payload)));
      });
      await page.goto(`${server.base}/`);
      await page.locator('.graphiql-query-editor .monaco-editor').waitFor();
      const editorText = async () => (await page.locator('.graphiql-query-editor').innerText()).replace(/\s+/g, ' ');
      const variablesText = async () => (await page.locator('.graphiql-editor-tool').innerText()).replace(/\s+/g, ' ');
      // The Variables pane as GraphiQL saves it (Monaco draws only the
      // lines in view).
      const savedVariables = () => page.evaluate(() => localStorage.getItem('graphiql:variables') ?? '');
      await until(async () => (await editorText()).includes("# Herald's GraphQL playground"), TIMEOUT.ui, 'the example operations in the editor', editorText);
      assert.match(await page.getByTestId('token-status').innerText(), /No token/);
      const [height, windowHeight] = await page.evaluate(() => [document.documentElement.scrollHeight, window.innerHeight]);
      assert.ok(height <= windowHeight, `the page scrolls past the playground: ${height} > ${windowHeight}`);

      // SignUp with the example variables; its token lands in the headers.
      await run(page, 'SignUp');
      // The example handles end in a suffix of this browser's own.
      await waitForResponse(page, 'the SignUp result', (s) => /"handle": "alice_[a-z2-9]{4}"/.test(s) && s.includes('"token": "'));
      await until(async () => /Signed in/.test(await page.getByTestId('token-status').innerText()), TIMEOUT.ui, 'the token status to say signed in');
      await screenshot(page, dir, 'playground-1-signup', false);
      const suffix = /"handle": "alice_([a-z2-9]{4})"/.exec(await responseText(page))[1];

      // A friend to follow, found by handle: its id goes into "userId"
      // by itself, and Follow runs on it with no copying.
      await run(page, 'CreateFriend');
      await waitForResponse(page, 'the CreateFriend result', (s) => s.includes(`"handle": "bob_${suffix}"`));
      await run(page, 'FindUser');
      await waitForResponse(page, 'the FindUser result', (s) => s.includes(`"handle": "bob_${suffix}"`) && s.includes('"viewerFollows": false'));
      const bobId = (await gql(server.base, null, 'query($h: String!) { user(handle: $h) { id } }', { h: `bob_${suffix}` })).user.id;
      await until(async () => (await savedVariables()).includes(`"userId": "${bobId}"`), TIMEOUT.ui, "bob's id in the Variables pane", savedVariables);
      await page.getByTestId('carried-ids').filter({ hasText: `userId ← @bob_${suffix}` }).waitFor();
      await run(page, 'Follow');
      await waitForResponse(page, 'the Follow result', (s) => s.includes(`"handle": "bob_${suffix}"`) && s.includes('"followerCount": 1') && s.includes('"viewerFollows": true'));
      await screenshot(page, dir, 'playground-1b-carried-id', false);

      // A direct message to bob: its conversation's id and its own are
      // carried, and Conversations lists the conversation.
      await run(page, 'SendDirectMessage');
      await waitForResponse(page, 'the SendDirectMessage result', (s) => s.includes('"text": "Tea at five?"') && s.includes('"seq": 1'));
      // Global ids are base64url of "Conversation:..." and
      // "ConversationMessage:...".
      await until(
        async () => /"conversationId": "Q29udmVyc2F0aW9uO[\w-]+"/.test(await savedVariables()) && /"conversationMessageId": "Q29udmVyc2F0aW9uTWVzc2FnZT[\w-]+"/.test(await savedVariables()),
        TIMEOUT.ui,
        'the conversation and message ids in the Variables pane',
        savedVariables,
      );
      await run(page, 'Conversations');
      await waitForResponse(page, 'the Conversations result', (s) => s.includes('"isGroup": false') && s.includes(`"handle": "bob_${suffix}"`) && s.includes('"conversationsUnreadCount": 0'));

      // The token is sent: Inbox, which needs sign-in, answers as alice.
      await run(page, 'Inbox');
      await waitForResponse(page, 'the Inbox result', (s) => /"totalCount": 0, "unreadCount": 0, "rebuilding": false/.test(s));

      // Without a token the server refuses the subscription's connection
      // (4403), and the result pane says so.
      page.once('dialog', (d) => void d.accept(''));
      await page.getByTestId('token-button').click();
      await until(async () => /No token/.test(await page.getByTestId('token-status').innerText()), TIMEOUT.ui, 'the token to be cleared');
      await run(page, 'InboxEvents');
      await waitForResponse(page, 'the refusal in the result pane', (s) => s.includes('websocket closed: 4403'));

      // Another user's token, pasted with the key button, is used for the
      // subscription: it follows an author who then posts over HTTP.
      const author = await signUp(server.base, uniqueHandle('author'));
      const reader = await signUp(server.base, uniqueHandle('reader'));
      await gql(server.base, reader.token, FOLLOW, { id: author.id });
      page.once('dialog', (d) => void d.accept(reader.token));
      await page.getByTestId('token-button').click();
      await until(
        async () => (await page.getByTestId('token-status').innerText()).includes(reader.token.slice(-8)),
        TIMEOUT.ui,
        "the reader's token in the headers",
      );

      await run(page, 'InboxEvents');
      await until(() => frames.some((f) => f.type === 'subscribe'), TIMEOUT.ui, 'the subscribe message on the websocket', () => JSON.stringify(frames));
      // A new connection for the new token, which its connection_init carries.
      const inits = frames.filter((f) => f.type === 'connection_init');
      assert.deepEqual(inits.map((f) => f.payload), [{}, { authorization: `Bearer ${reader.token}` }], 'connection_init payloads');
      // The server registers a subscription just after reading its
      // subscribe message; the post waits that moment out.
      await new Promise((r) => setTimeout(r, 300));
      const text = `live from ${author.handle}`;
      const { postMessage: posted } = await gql(server.base, author.token, POST, { t: text });
      await waitForResponse(page, 'the ADDED event in the result pane', (s) => s.includes('"type": "ADDED"') && s.includes(text) && s.includes('"unreadCount": 1'));
      await screenshot(page, dir, 'playground-2-subscription', false);

      // The run button now stops the subscription.
      await page.locator('.graphiql-execute-button').click();
      await until(async () => (await page.locator('.graphiql-execute-button').getAttribute('aria-label'))?.startsWith('Execute'), TIMEOUT.ui, 'the subscription to stop');

      // The event's message id was carried into "messageId".
      await until(async () => (await savedVariables()).includes(`"messageId": "${posted.id}"`), TIMEOUT.ui, 'the event message id in the Variables pane', savedVariables);

      // A reload keeps the one tab, the examples and the edited variables.
      await page.getByText(/"handle":\s"alice_/).click();
      await page.keyboard.press('End');
      await page.keyboard.insertText(' "edited": true,');
      await until(async () => (await variablesText()).includes('"edited": true'), TIMEOUT.ui, 'the edit in the Variables pane', variablesText);
      await new Promise((r) => setTimeout(r, 700)); // GraphiQL saves tabs 500 ms after a change
      await page.reload();
      await page.locator('.graphiql-query-editor .monaco-editor').waitFor();
      await until(async () => (await editorText()).includes("# Herald's GraphQL playground"), TIMEOUT.ui, 'the example operations after a reload', editorText);
      await until(async () => (await variablesText()).includes('"edited": true'), TIMEOUT.ui, 'the edited variables after a reload', variablesText);
      assert.equal(await page.locator('.graphiql-tab').count(), 1, 'tabs after a reload');
    });
  });
});

describe('demo client at /app/', () => {
  // go follows an in-app link, as a click on it would: the page stays.
  const go = (page, hash) => page.evaluate((h) => (location.hash = h), hash);
  const errorToast = (page, code) => page.locator(`[data-testid="error"][data-code="${code}"]`);

  test('signs up, follows, and follows the timeline live', async () => {
    await withContext(async (context) => {
      const page = await context.newPage();
      const author = await signUp(server.base, uniqueHandle('bob'));
      const handle = uniqueHandle('ann');

      await page.goto(`${server.base}/app/`);
      await screenshot(page, dir, 'app-0-sign-in');
      await page.getByTestId('auth-handle').fill(handle);
      await page.getByLabel('Password').fill('correct horse');
      await page.getByLabel(/Display name/).fill('Ann');
      await page.getByTestId('signup').click();
      await page.getByTestId('viewer').filter({ hasText: `Ann (@${handle})` }).waitFor();
      await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
      // A new account's timeline says what to do, not "0 items".
      await page.getByTestId('empty').filter({ hasText: 'Your timeline is empty' }).waitFor();
      await screenshot(page, dir, 'app-0b-empty-home');
      await page.evaluate(() => {
        // Survives only as long as the page is not reloaded.
        window.heraldMarker = 'same page';
      });

      // A missing profile says so in words; a refused post is explained,
      // its code kept on the toast.
      await go(page, `#/u/nobody_here`);
      await page.getByTestId('empty').filter({ hasText: 'No one is called @nobody_here' }).waitFor();
      await go(page, '#/home');
      await page.getByTestId('compose-text').fill(' ');
      await page.getByTestId('post').click();
      await errorToast(page, 'BAD_USER_INPUT').filter({ hasText: 'Please check: ' }).waitFor();
      assert.doesNotMatch(await page.getByTestId('error').innerText(), /BAD_USER_INPUT/, 'no raw code in the message');

      // Find the author's profile and follow them.
      await go(page, `#/u/${author.handle}`);
      await page.getByTestId('found-user').filter({ hasText: `@${author.handle}` }).waitFor();
      assert.equal(await page.getByTestId('error').isVisible(), false, 'the error is cleared by the next action');
      await page.getByTestId('follow-toggle').filter({ hasText: /^Follow$/ }).click();
      await page.getByTestId('follow-toggle').filter({ hasText: /^Following$/ }).waitFor();
      await page.getByTestId('count-followers').filter({ hasText: /^1 follower$/ }).waitFor();
      await go(page, '#/home');

      // The author posts: the item arrives live, unread and marked so.
      const items = page.getByTestId('inbox-item');
      const { postMessage: posted } = await gql(server.base, author.token, POST, { t: 'first post' });
      await items.filter({ hasText: 'first post' }).waitFor({ timeout: TIMEOUT.event });
      await page.getByTestId('unread-badge').filter({ hasText: /^1$/ }).waitFor();
      await page.locator('[data-testid="inbox-item"].unread').filter({ hasText: 'first post' }).waitFor();
      assert.equal(await items.first().getByTestId('time').innerText(), 'now', 'a relative time');
      assert.ok(await items.first().getByTestId('time').getAttribute('title'), 'the absolute time in the title');
      await screenshot(page, dir, 'app-1-live-item');

      // Mark read clears the badge and the marker.
      await page.getByTestId('mark-read').click();
      await page.getByTestId('unread-badge').waitFor({ state: 'hidden' });
      assert.equal(await page.locator('[data-testid="inbox-item"].unread').count(), 0, 'no unread marker');

      // A like counts at once and is taken back by a second press.
      await items.first().getByTestId('like').click();
      await items.first().getByTestId('like-count').filter({ hasText: /^1$/ }).waitFor();
      assert.equal(await items.first().getByTestId('like').getAttribute('aria-pressed'), 'true');
      const counted = await gql(server.base, author.token, 'query($id: ID!) { node(id: $id) { ... on Message { likeCount likedBy(first: 1) { edges { node { handle } } } } } }', { id: posted.id });
      assert.deepEqual(counted.node, { likeCount: 1, likedBy: { edges: [{ node: { handle } }] } });
      await items.first().getByTestId('like').click();
      await items.first().getByTestId('like').and(page.locator('[aria-pressed="false"]')).waitFor();
      assert.equal(await items.first().getByTestId('like-count').innerText(), '');

      // A repost counts at once and is taken back by a second press.
      await items.first().getByTestId('repost').click();
      await items.first().getByTestId('repost-count').filter({ hasText: /^1$/ }).waitFor();
      assert.equal(await items.first().getByTestId('repost').getAttribute('aria-pressed'), 'true');
      const reposted = await gql(server.base, author.token, 'query($id: ID!) { node(id: $id) { ... on Message { repostCount } } }', { id: posted.id });
      assert.deepEqual(reposted.node, { repostCount: 1 });
      await items.first().getByTestId('repost').click();
      await items.first().getByTestId('repost').and(page.locator('[aria-pressed="false"]')).waitFor();
      assert.equal(await items.count(), 1, "one's own repost of a message shown is not a second item");

      // The author reposts a message by someone the viewer does not
      // follow: it arrives live as the message, reposted by the author,
      // and leaves when the author takes the repost back.
      const other = await signUp(server.base, uniqueHandle('cyd'));
      const { postMessage: shared } = await gql(server.base, other.token, POST, { t: 'worth sharing' });
      await gql(server.base, author.token, 'mutation($id: ID!) { repost(messageId: $id) { id } }', { id: shared.id });
      const sharedItem = items.filter({ hasText: 'worth sharing' });
      await sharedItem.getByTestId('reposted-by').filter({ hasText: `@${author.handle} reposted` }).waitFor({ timeout: TIMEOUT.event });
      assert.equal(await items.first().getByTestId('message-text').innerText(), 'worth sharing', 'the newest item');
      await sharedItem.getByTestId('repost-count').filter({ hasText: /^1$/ }).waitFor();
      await screenshot(page, dir, 'app-1b-reposted');
      await gql(server.base, author.token, 'mutation($id: ID!) { unrepost(messageId: $id) { id } }', { id: shared.id });
      await sharedItem.waitFor({ state: 'detached', timeout: TIMEOUT.event });
      // "Mark all read" shows only while something is unread.
      if (await page.getByTestId('mark-read').isVisible()) await page.getByTestId('mark-read').click();
      await page.getByTestId('unread-badge').waitFor({ state: 'hidden' });

      // An edit shows in place.
      await gql(server.base, author.token, 'mutation($id: ID!) { editMessage(id: $id, text: "first post, edited") { id } }', { id: posted.id });
      await items.filter({ hasText: 'first post, edited' }).waitFor({ timeout: TIMEOUT.event });
      assert.equal(await items.count(), 1);
      assert.equal(await items.first().getByTestId('edited').count(), 1);
      await screenshot(page, dir, 'app-2-edited');

      // A deletion removes it, and the empty timeline says so.
      await gql(server.base, author.token, 'mutation($id: ID!) { deleteMessage(id: $id) }', { id: posted.id });
      await items.first().waitFor({ state: 'detached', timeout: TIMEOUT.event });
      await page.getByTestId('empty').filter({ hasText: 'Your timeline is empty' }).waitFor();
      assert.equal(await page.evaluate(() => window.heraldMarker), 'same page', 'the page was reloaded');

      // A reply, posted, edited and deleted in place: one's own messages
      // are at home too. Reading the inbox elsewhere (here over HTTP)
      // clears the badge through a READ event.
      const { postMessage: second } = await gql(server.base, author.token, POST, { t: 'second post' });
      await page.getByTestId('unread-badge').filter({ hasText: /^1$/ }).waitFor({ timeout: TIMEOUT.event });
      const ownToken = await page.evaluate(() => localStorage.getItem('herald.token'));
      await gql(server.base, ownToken, 'mutation { markInboxRead }');
      await page.getByTestId('unread-badge').waitFor({ state: 'hidden', timeout: TIMEOUT.event });
      await items.filter({ hasText: 'second post' }).getByTestId('reply').click({ timeout: TIMEOUT.event });
      await page.getByTestId('replying').filter({ hasText: '@' + author.handle }).waitFor();
      await page.getByTestId('reply-text').fill(`my reply, @${author.handle.toUpperCase()} and @nobody_here`);
      await page.getByTestId('reply-send').click();
      const mine = items.filter({ hasText: 'my reply' });
      await mine.getByTestId('reply-to').filter({ hasText: 'Replying to @' + author.handle }).waitFor({ timeout: TIMEOUT.event });
      await items.filter({ hasText: 'second post' }).getByTestId('show-replies').filter({ hasText: /^1 reply$/ }).waitFor();
      // The handle, in any case, is resolved to its user; an unknown one is not.
      assert.deepEqual(await mine.getByTestId('mention').allInnerTexts(), [`@${author.handle.toUpperCase()}`]);
      assert.equal(await mine.getByTestId('mention').getAttribute('href'), `#/u/${author.handle}`);
      await screenshot(page, dir, 'app-2b-own-reply-at-home');
      await mine.getByTestId('edit').click();
      await page.getByTestId('edit-text').fill('my reply, edited');
      await page.getByTestId('save').click();
      await items.filter({ hasText: 'my reply, edited' }).waitFor();
      assert.equal(await items.filter({ hasText: 'my reply, edited' }).getByTestId('mention').count(), 0, 'the edit mentions no one');
      const seen = await gql(server.base, author.token, 'query($h: String!) { user(handle: $h) { messages(first: 1) { edges { node { text replyTo { id } } } } } }', { h: handle });
      assert.deepEqual(seen.user.messages.edges[0].node, { text: 'my reply, edited', replyTo: { id: second.id } });
      await items.filter({ hasText: 'my reply, edited' }).getByTestId('delete').click();
      await page.getByTestId('dialog').filter({ hasText: 'Delete this message?' }).waitFor();
      await screenshot(page, dir, 'app-2c-confirm-delete', false);
      await page.getByTestId('dialog-confirm').click();
      await items.filter({ hasText: 'my reply' }).waitFor({ state: 'detached' });

      // Paging: 21 more posts make two pages after a reload, which also
      // shows the session kept in localStorage.
      for (let i = 1; i <= 21; i++) await gql(server.base, author.token, POST, { t: `bulk ${i}` });
      await until(async () => (await items.count()) === 22, TIMEOUT.event, '22 items live', () => items.count());
      await page.reload();
      await page.getByTestId('viewer').filter({ hasText: `@${handle}` }).waitFor();
      await until(async () => (await items.count()) === 20, TIMEOUT.ui, 'the first page of 20', () => items.count());
      assert.equal(await items.first().getByTestId('message-text').innerText(), 'bulk 21');
      await page.getByTestId('load-more').click();
      await until(async () => (await items.count()) === 22, TIMEOUT.ui, 'the second page', () => items.count());
      assert.equal(await items.last().getByTestId('message-text').innerText(), 'second post');
      await page.getByTestId('load-more').waitFor({ state: 'hidden' });

      // Unfollowing takes the author's items out of the timeline.
      await go(page, `#/u/${author.handle}`);
      await page.getByTestId('follow-toggle').filter({ hasText: /^Following$/ }).click();
      await page.getByTestId('follow-toggle').filter({ hasText: /^Follow$/ }).waitFor();
      await go(page, '#/home');
      await until(async () => (await items.count()) === 0, TIMEOUT.ui, 'the timeline to empty', () => items.count());
      await screenshot(page, dir, 'app-3-unfollowed');

      // One's own post shows at home at once, and a thread opens from it:
      // the author answers, the viewer opens the conversation.
      await page.getByTestId('compose-text').fill('ask me anything');
      await page.getByTestId('post').click();
      await items.filter({ hasText: 'ask me anything' }).waitFor();
      assert.equal(await page.locator('#view-home [data-testid="empty"]').count(), 0, 'no empty state while one post is shown');
      const asked = await gql(server.base, ownToken, 'query { viewer { messages(first: 1) { edges { node { id } } } } }');
      await gql(server.base, author.token, 'mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }',
        { in: { text: 'an answer', replyTo: asked.viewer.messages.edges[0].node.id } });
      await page.reload();
      const askedItem = items.filter({ hasText: 'ask me anything' });
      await askedItem.getByTestId('show-replies').filter({ hasText: '1 reply' }).click({ timeout: TIMEOUT.ui });
      await page.getByTestId('thread-focus').filter({ hasText: 'ask me anything' }).waitFor();
      await page.getByTestId('reply-item').filter({ hasText: 'an answer' }).waitFor();
      await screenshot(page, dir, 'app-3b-thread');

      // A taken handle is refused in words.
      await page.getByTestId('logout').click();
      await page.getByTestId('auth-handle').fill(handle);
      await page.getByLabel('Password').fill('correct horse');
      await page.getByTestId('signup').click();
      await page.locator('[data-testid="auth-error"][data-code="CONFLICT"]').filter({ hasText: 'That handle is taken' }).waitFor();
      await screenshot(page, dir, 'app-3c-handle-taken');
      await page.getByTestId('login').click();
      await page.getByTestId('viewer').filter({ hasText: `@${handle}` }).waitFor();

      // A token the server does not accept ends the session at the next load.
      await page.evaluate(() => localStorage.setItem('herald.token', 'not-a-token'));
      await page.reload();
      await errorToast(page, 'UNAUTHENTICATED').filter({ hasText: 'Your session has ended' }).waitFor();
      await page.getByTestId('auth-form').waitFor();
      assert.equal(await page.evaluate(() => localStorage.getItem('herald.token')), null);
    });
  });

  test('edits the profile, finds people by search and follows from the results', async () => {
    const user = await signUp(server.base, uniqueHandle('pat'));
    await gql(server.base, user.token, POST, { t: 'before the rename' });
    await withContext(async (context) => {
      const page = await context.newPage();
      await page.goto(`${server.base}/app/`);
      await page.getByTestId('auth-handle').fill(user.handle);
      await page.getByLabel('Password').fill('correct horse');
      await page.getByTestId('login').click();
      const mine = page.getByTestId('inbox-item').filter({ hasText: 'before the rename' });
      await mine.getByTestId('author-name').filter({ hasText: new RegExp(`^${user.handle}$`) }).waitFor();

      await page.getByTestId('tab-settings').click();
      assert.equal(await page.getByTestId('profile-display-name').inputValue(), user.handle, 'the editor starts from the profile');

      // A refused URL is explained next to the form, and nothing changes.
      await page.getByTestId('profile-website').fill('javascript:alert(1)');
      await page.getByTestId('profile-save').click();
      await page.getByTestId('profile-error').filter({ hasText: 'Please check your profile: the website URL must be an http or https URL.' }).waitFor();

      await page.getByTestId('profile-display-name').fill('Pat Renamed');
      await page.getByTestId('profile-bio').fill('Writes code.\nReads books.');
      await page.getByTestId('profile-website').fill('https://pat.example/');
      await page.getByTestId('profile-save').click();
      await page.getByTestId('profile-saved').waitFor();
      assert.equal(await page.getByTestId('profile-error').isVisible(), false, 'the earlier problem is gone');
      await page.getByTestId('viewer').filter({ hasText: `Pat Renamed (@${user.handle})` }).waitFor();
      await screenshot(page, dir, 'app-5a-settings');
      await page.getByTestId('tab-home').click();
      await mine.getByTestId('author-name').filter({ hasText: /^Pat Renamed$/ }).waitFor();

      // The profile as others see it: name, bio with its line break, website.
      await page.getByTestId('tab-profile').click();
      await page.getByTestId('found-name').filter({ hasText: /^Pat Renamed$/ }).waitFor();
      assert.equal(await page.getByTestId('found-bio').innerText(), 'Writes code.\nReads books.');
      assert.equal(await page.getByTestId('found-website').getAttribute('href'), 'https://pat.example/');
      await page.getByTestId('profile-message').filter({ hasText: 'Pat Renamed' }).first().waitFor();
      await screenshot(page, dir, 'app-5-profile');

      // The typeahead finds the new name by a prefix of a word of it,
      // whatever the case, and follows from the result.
      const other = await signUp(server.base, uniqueHandle('quin'));
      await gql(server.base, other.token, 'mutation { updateProfile(input: {displayName: "Quinn Ëvergreen", bio: "Grows trees."}) { id } }');
      await page.getByTestId('tab-search').click();
      await page.getByTestId('search-query').fill('EVERG');
      const hit = page.getByTestId('search-result').filter({ hasText: `Quinn Ëvergreen@${other.handle}` });
      await hit.waitFor();
      await hit.getByTestId('search-follow').click();
      await hit.getByTestId('row-followers').filter({ hasText: '1 follower' }).waitFor();
      await hit.getByTestId('search-follow').filter({ hasText: /^Following$/ }).waitFor();
      await screenshot(page, dir, 'app-6-search');
      await page.getByTestId('search-query').fill('zzzz_nobody');
      await page.getByTestId('empty').filter({ hasText: 'Nobody matches' }).waitFor();

      // Their followers list shows the viewer, with the way back.
      await go(page, `#/u/${other.handle}/followers`);
      await page.getByTestId('followers-list').getByTestId('user-row').filter({ hasText: `@${user.handle}` }).waitFor();
      await screenshot(page, dir, 'app-6b-followers');

      // And so does the API.
      const d = await gql(server.base, null, 'query($h: String!) { user(handle: $h) { displayName bio websiteUrl avatarUrl } }', { h: user.handle });
      assert.deepEqual(d.user, { displayName: 'Pat Renamed', bio: 'Writes code.\nReads books.', websiteUrl: 'https://pat.example/', avatarUrl: null });
    });
  });

  test('at phone width: home, a profile, a thread and notifications fit', async () => {
    const me = await signUp(server.base, uniqueHandle('mia'));
    const friend = await signUp(server.base, uniqueHandle('fred'));
    await gql(server.base, friend.token, 'mutation { updateProfile(input: {displayName: "Fred Longname-Whitfield", bio: "Birds, bikes and bread."}) { id } }');
    await gql(server.base, me.token, FOLLOW, { id: friend.id });
    await gql(server.base, friend.token, FOLLOW, { id: me.id });
    const { postMessage: mine } = await gql(server.base, me.token, POST, { t: 'Morning! Who is up for a ride along the river today?' });
    await gql(server.base, friend.token, 'mutation($id: ID!) { like(messageId: $id) { id } }', { id: mine.id });
    await gql(server.base, friend.token, 'mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }', { in: { text: `@${me.handle} count me in, 9 sharp at the bridge`, replyTo: mine.id } });
    await gql(server.base, friend.token, POST, { t: 'A long one to see wrapping: supercalifragilisticexpialidocious-and-then-some-more-text-without-spaces' });
    await withContext(async (context) => {
      const page = await context.newPage();
      await page.setViewportSize({ width: 390, height: 844 });
      await page.addInitScript((t) => localStorage.setItem('herald.token', t), me.token);
      await page.goto(`${server.base}/app/`);
      await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
      await page.getByTestId('inbox-item').filter({ hasText: 'Morning!' }).waitFor();
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `the page scrolls sideways at 390 px: ${width}`);
      await page.getByTestId('notif-badge').filter({ hasText: /^\d+$/ }).waitFor();
      await screenshot(page, dir, 'phone-1-home', false);
      await page.getByTestId('tab-notifications').click();
      await page.getByTestId('notification').first().waitFor();
      await screenshot(page, dir, 'phone-2-notifications', false);
      await go(page, `#/u/${friend.handle}`);
      await page.getByTestId('found-name').waitFor();
      await page.getByTestId('profile-message').first().waitFor();
      await screenshot(page, dir, 'phone-3-profile', false);
      await go(page, `#/m/${encodeURIComponent(mine.id)}`);
      await page.getByTestId('reply-item').first().waitFor();
      await screenshot(page, dir, 'phone-4-thread', false);
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no sideways scroll in a thread');
    });
  });

  test('logs out everywhere: every other session ends at once', async () => {
    const user = await signUp(server.base, uniqueHandle('lou'));
    const logIn = async (page) => {
      await page.goto(`${server.base}/app/`);
      await page.getByTestId('auth-handle').fill(user.handle);
      await page.getByLabel('Password').fill('correct horse');
      await page.getByTestId('login').click();
      await page.getByTestId('live-status').filter({ hasText: /^Live$/ }).waitFor();
    };
    await withContext(async (phone) => {
      await withContext(async (laptop) => {
        const onPhone = await phone.newPage();
        const onLaptop = await laptop.newPage();
        await logIn(onPhone);
        await logIn(onLaptop);

        await onLaptop.getByTestId('tab-settings').click();
        await onLaptop.getByTestId('logout-everywhere').click();
        await onLaptop.getByTestId('auth-form').waitFor();
        // The phone's websocket is closed with 4403 as the token ends:
        // it is signed out without reloading or acting.
        await onPhone.getByTestId('auth-form').waitFor({ timeout: TIMEOUT.event });
        await onPhone.locator('[data-testid="error"][data-code="WS_4403"], [data-testid="error"][data-code="UNAUTHENTICATED"]').filter({ hasText: /signed out|session has ended/ }).waitFor();
        await screenshot(onPhone, dir, 'app-4-logged-out-elsewhere');
        // The old token is refused by the API too.
        await assert.rejects(gql(server.base, user.token, '{ viewer { id } }'), /UNAUTHENTICATED/);
      });
    });
  });
});
