// Herald's demo client: sign in, follow people, post, and a home timeline
// kept current by inbox events over graphql-transport-ws.
import './style.css';

import { ApiError, gql, subscribe, type LiveState } from './api';
import { h, must } from './dom';

const TOKEN_KEY = 'herald.token';
const PAGE = 20;

interface Author {
  id: string;
  handle: string;
  displayName: string;
}

interface Message {
  id: string;
  text: string;
  kind: 'POST' | 'REPLY' | 'REPOST';
  createdAt: string;
  editedAt: string | null;
  author: Author;
  replyTo: { id: string; text: string; author: { handle: string } } | null;
  mentions: { handle: string }[];
  likeCount: number;
  viewerHasLiked: boolean;
  repostCount: number;
  viewerHasReposted: boolean;
  replyCount: number;
}

// An inbox item: its message (for a repost, the message reposted) and who
// reposted it.
interface Edge {
  cursor: string;
  deliveredAt: string;
  repostedBy: { id: string; handle: string } | null;
  node: Message;
}

// The viewer's own profile, as the profile editor edits it.
interface Profile extends Author {
  bio: string | null;
  websiteUrl: string | null;
  avatarUrl: string | null;
}

const PROFILE = 'id handle displayName bio websiteUrl avatarUrl';

interface FoundUser extends Profile {
  followerCount: number;
  followingCount: number;
  messageCount: number;
  viewerFollows: boolean;
}

interface InboxPage {
  totalCount: number;
  unreadCount: number;
  rebuilding: boolean;
  edges: Edge[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

// Each event type sets its own fields only: edge (ADDED), message (EDITED),
// deletedMessageId (DELETED), removedMessageId (REMOVED).
interface InboxEvent {
  type: 'ADDED' | 'EDITED' | 'DELETED' | 'REMOVED' | 'READ';
  cursor: string;
  unreadCount: number;
  totalCount: number;
  edge: Edge | null;
  message: Message | null;
  deletedMessageId: string | null;
  removedMessageId: string | null;
}

const MESSAGE = `fragment Msg on Message {
  id text kind createdAt editedAt
  author { id handle displayName }
  replyTo { id text author { handle } }
  mentions { handle }
  likeCount viewerHasLiked repostCount viewerHasReposted replyCount
}`;
const EDGE = 'cursor deliveredAt repostedBy { id handle } node { ...Msg }';
const USER = 'id handle displayName bio websiteUrl avatarUrl followerCount followingCount messageCount viewerFollows';
const INBOX = `query Inbox($first: Int!, $after: String) {
  inbox(first: $first, after: $after) {
    totalCount unreadCount rebuilding
    edges { ${EDGE} }
    pageInfo { hasNextPage endCursor }
  }
}
${MESSAGE}`;
const INBOX_EVENTS = `subscription InboxEvents($after: String) {
  inboxEvents(after: $after) {
    type unreadCount totalCount cursor
    edge { ${EDGE} }
    message { ...Msg }
    deletedMessageId removedMessageId
  }
}
${MESSAGE}`;

// A group of the notifications feed: "bob and 2 others liked your post".
interface NotificationGroup {
  id: string;
  kind: 'FOLLOWED' | 'LIKED' | 'REPOSTED' | 'REPLIED' | 'MENTIONED';
  count: number;
  latestActors: { handle: string }[];
  message: { id: string; text: string } | null;
  latestAt: string;
  unread: boolean;
}

interface NotificationEvent {
  type: 'ADDED' | 'READ';
  cursor: string;
  unreadCount: number;
  totalCount: number;
  edge: { cursor: string; node: NotificationGroup } | null;
}

const GROUP = 'id kind count latestActors { handle } message { id text } latestAt unread';
const NOTIFICATIONS = `query Notifications($first: Int!) {
  notifications(first: $first) { totalCount unreadCount edges { node { ${GROUP} } } }
}`;
const NOTIFICATION_EVENTS = `subscription NotificationEvents($after: String) {
  notificationEvents(after: $after) { type cursor unreadCount totalCount edge { cursor node { ${GROUP} } } }
}`;

const el = {
  session: must('session'),
  viewer: must('viewer'),
  logout: must<HTMLButtonElement>('logout'),
  logoutEverywhere: must<HTMLButtonElement>('logout-everywhere'),
  error: must('error'),
  signin: must('signin'),
  authForm: must<HTMLFormElement>('auth-form'),
  home: must('home'),
  findForm: must<HTMLFormElement>('find-form'),
  found: must('found'),
  compose: must<HTMLFormElement>('compose'),
  composeText: must<HTMLTextAreaElement>('compose-text'),
  replying: must('replying'),
  replyingText: must('replying-text'),
  cancelReply: must<HTMLButtonElement>('cancel-reply'),
  unread: must('unread'),
  total: must('total'),
  live: must('live'),
  markRead: must<HTMLButtonElement>('mark-read'),
  rebuilding: must('rebuilding'),
  inbox: must<HTMLOListElement>('inbox'),
  inboxEmpty: must('inbox-empty'),
  loadMore: must<HTMLButtonElement>('load-more'),
  mine: must<HTMLOListElement>('mine'),
  notifUnread: must('notif-unread'),
  notifTotal: must('notif-total'),
  notifMarkRead: must<HTMLButtonElement>('notif-mark-read'),
  notifications: must<HTMLOListElement>('notifications'),
  notifEmpty: must('notif-empty'),
  search: must<HTMLInputElement>('search'),
  searchResults: must<HTMLUListElement>('search-results'),
  profileForm: must<HTMLFormElement>('profile-form'),
  profileError: must('profile-error'),
  profileSaved: must('profile-saved'),
};

let token: string | null = localStorage.getItem(TOKEN_KEY);
let viewer: Author | null = null;
let stopLive: (() => void) | null = null;
let stopNotifs: (() => void) | null = null;
// The cursors of the last live events, to resume after them on a reconnect.
let lastEvent: string | null = null;
let lastNotif: string | null = null;
let replyTo: Message | null = null;
// The inbox as shown: its items in DOM order, and where the next page starts.
const shown = new Map<string, Message>();
// The shown items that are reposts, by the id of the message shown: who
// reposted it, and when it reached the inbox, which is its place.
const reposts = new Map<string, { by: { id: string; handle: string }; at: string }>();
let nextCursor: string | null = null;
let hasMore = false;
let rebuildChecks = 0;

// ---- errors and busy buttons ----

function showError(err: unknown): void {
  const e = err instanceof ApiError ? err : new ApiError('ERROR', String((err as Error)?.message ?? err));
  el.error.textContent = `${e.code}: ${e.message}`;
  el.error.hidden = false;
  // A token the server no longer accepts (over HTTP, or in the websocket's
  // connection_init: 4403) ends the session.
  if ((e.code === 'UNAUTHENTICATED' || e.code === 'WS_4403') && token) signOut();
}

function clearError(): void {
  el.error.hidden = true;
  el.error.textContent = '';
}

// act runs an action started by button: the button is disabled meanwhile,
// and a failure is shown.
async function act(button: HTMLButtonElement | null, f: () => Promise<void>): Promise<void> {
  // A new action by the user replaces the last error; background work
  // (null button) leaves it for the user to read.
  if (button) {
    clearError();
    button.disabled = true;
  }
  try {
    await f();
  } catch (err) {
    showError(err);
  } finally {
    if (button) button.disabled = false;
  }
}

// ---- session ----

async function start(): Promise<void> {
  if (!token) return showSignIn();
  try {
    const d = await gql<{ viewer: Profile | null }>(`{ viewer { ${PROFILE} } }`, {}, token);
    if (!d.viewer) throw new ApiError('UNAUTHENTICATED', 'your session has expired; log in again');
    showHome(d.viewer);
  } catch (err) {
    showSignIn();
    showError(err);
  }
}

function showSignIn(): void {
  el.signin.hidden = false;
  el.home.hidden = true;
  el.session.hidden = true;
}

function showHome(v: Profile): void {
  viewer = v;
  el.viewer.textContent = `${v.displayName} (@${v.handle})`;
  fillProfile(v);
  el.signin.hidden = true;
  el.session.hidden = false;
  el.home.hidden = false;
  startLive();
  void act(null, async () => {
    await Promise.all([loadInbox(), loadMine(), loadNotifications()]);
  });
}

function signOut(): void {
  stopLive?.();
  stopLive = null;
  stopNotifs?.();
  stopNotifs = null;
  el.notifications.replaceChildren();
  lastEvent = null;
  lastNotif = null;
  token = null;
  viewer = null;
  localStorage.removeItem(TOKEN_KEY);
  shown.clear();
  reposts.clear();
  nextCursor = null;
  hasMore = false;
  rebuildChecks = 0;
  delete el.inbox.dataset.loaded;
  el.inbox.replaceChildren();
  el.mine.replaceChildren();
  el.found.hidden = true;
  setReplyTo(null);
  showSignIn();
}

el.authForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const submitter = (ev as SubmitEvent).submitter as HTMLButtonElement | null;
  const op = submitter?.value === 'logIn' ? 'logIn' : 'signUp';
  const f = new FormData(el.authForm);
  const input: Record<string, string> = { handle: String(f.get('handle')), password: String(f.get('password')) };
  const displayName = String(f.get('displayName') ?? '').trim();
  if (op === 'signUp' && displayName) input.displayName = displayName;
  const type = op === 'signUp' ? 'SignUpInput' : 'LogInInput';
  void act(submitter, async () => {
    const d = await gql<Record<string, { token: string; user: Profile }>>(
      `mutation($input: ${type}!) { ${op}(input: $input) { token user { ${PROFILE} } } }`,
      { input },
      null,
    );
    token = d[op].token;
    localStorage.setItem(TOKEN_KEY, token);
    el.authForm.reset();
    showHome(d[op].user);
  });
});

// Logging out ends the token on the server too (every Herald instance
// refuses it from then on, and closes its websockets); everywhere ends
// every token of the account, on every device. The local session ends
// even when the server cannot be reached.
for (const [button, op] of [
  [el.logout, 'logOut'],
  [el.logoutEverywhere, 'logOutEverywhere'],
] as const) {
  button.addEventListener('click', () => {
    const t = token;
    clearError();
    signOut();
    if (t) void act(null, async () => void (await gql(`mutation { ${op} }`, {}, t)));
  });
}

// ---- live events ----

// startLive subscribes to the inbox's events. A reconnect resumes after the
// last event received, so the server replays what happened meanwhile; when
// it cannot (RESUME_EXPIRED: too long away), or before any event came, the
// top of the inbox is read again instead.
function startLive(): void {
  stopLive?.();
  if (!token) return;
  stopLive = subscribe<{ inboxEvents: InboxEvent }>(INBOX_EVENTS, token, () => ({ after: lastEvent }), {
    event: (d) => {
      lastEvent = d.inboxEvents.cursor;
      onEvent(d.inboxEvents);
    },
    error: (e) => {
      if (e.code !== 'RESUME_EXPIRED') return showError(e);
      lastEvent = null;
      startLive();
      void act(null, refreshTop);
    },
    state: (s: LiveState) => {
      el.live.textContent = s;
      // The first connection's page is loaded by showHome.
      if (s === 'live' && lastEvent === null && el.inbox.dataset.loaded === 'yes') void act(null, refreshTop);
    },
  });
}

// The notifications feed has its own subscription: the two lists are kept
// apart, and a client may want only one.
function startNotifications(): void {
  stopNotifs?.();
  if (!token) return;
  stopNotifs = subscribe<{ notificationEvents: NotificationEvent }>(NOTIFICATION_EVENTS, token, () => ({ after: lastNotif }), {
    event: (d) => {
      lastNotif = d.notificationEvents.cursor;
      onNotification(d.notificationEvents);
    },
    error: (e) => {
      if (e.code !== 'RESUME_EXPIRED') return showError(e);
      lastNotif = null;
      startNotifications();
      void act(null, loadNotifications);
    },
    state: () => {},
  });
}

function onNotification(ev: NotificationEvent): void {
  setNotifCounts(ev.unreadCount, ev.totalCount);
  if (ev.type === 'ADDED' && ev.edge) {
    // A group that gained an actor keeps its id: it moves to the top.
    el.notifications.querySelector(`li[data-id="${CSS.escape(ev.edge.node.id)}"]`)?.remove();
    el.notifications.prepend(notificationItem(ev.edge.node));
  } else if (ev.type === 'READ') {
    for (const li of el.notifications.querySelectorAll('li.unread')) li.classList.remove('unread');
  }
  el.notifEmpty.hidden = el.notifications.children.length > 0;
}

function setNotifCounts(unread: number, total: number): void {
  el.notifUnread.textContent = String(unread);
  el.notifUnread.setAttribute('aria-label', `${unread} unread`);
  el.notifUnread.hidden = unread === 0;
  el.notifTotal.textContent = plural(total, 'notification');
}

const verbs: Record<NotificationGroup['kind'], string> = {
  FOLLOWED: 'followed you',
  LIKED: 'liked your message',
  REPOSTED: 'reposted your message',
  REPLIED: 'replied to you',
  MENTIONED: 'mentioned you',
};

function notificationItem(g: NotificationGroup): HTMLLIElement {
  const names = g.latestActors.map((a) => '@' + a.handle);
  const others = g.count - 1;
  const who = names.length === 0 ? plural(g.count, 'user') : others > 0 ? `${names[0]} and ${plural(others, 'other')}` : names[0];
  return h(
    'li',
    { class: g.unread ? 'message unread' : 'message', 'data-testid': 'notification', 'data-id': g.id, 'data-kind': g.kind },
    h('p', { class: 'byline' }, h('strong', { 'data-testid': 'notification-text' }, `${who} ${verbs[g.kind]}`), ' · ', h('time', { datetime: g.latestAt }, formatTime(g.latestAt))),
    g.message ? h('p', { class: 'text' }, g.message.text) : null,
  );
}

async function loadNotifications(): Promise<void> {
  startNotifications();
  const d = await gql<{ notifications: { totalCount: number; unreadCount: number; edges: { node: NotificationGroup }[] } }>(
    NOTIFICATIONS,
    { first: PAGE },
    token,
  );
  el.notifications.replaceChildren(...d.notifications.edges.map((e) => notificationItem(e.node)));
  el.notifEmpty.hidden = d.notifications.edges.length > 0;
  setNotifCounts(d.notifications.unreadCount, d.notifications.totalCount);
}

el.notifMarkRead.addEventListener('click', () =>
  void act(el.notifMarkRead, async () => {
    const d = await gql<{ markNotificationsRead: number }>('mutation { markNotificationsRead }', {}, token);
    el.notifUnread.textContent = String(d.markNotificationsRead);
    el.notifUnread.hidden = d.markNotificationsRead === 0;
  }),
);

function onEvent(ev: InboxEvent): void {
  setCounts(ev.unreadCount, ev.totalCount);
  switch (ev.type) {
    case 'ADDED':
      if (ev.edge) insertInOrder(ev.edge);
      break;
    case 'EDITED':
      if (ev.message) updateText(ev.message);
      break;
    case 'DELETED':
    case 'REMOVED': {
      const id = ev.deletedMessageId ?? ev.removedMessageId;
      if (id) {
        remove(id);
        afterChange();
      }
      break;
    }
    case 'READ':
      break;
  }
}

// ---- the inbox ----

function setCounts(unread: number, total: number): void {
  el.unread.textContent = String(unread);
  el.unread.setAttribute('aria-label', `${unread} unread`);
  el.unread.hidden = unread === 0;
  el.total.textContent = plural(total, 'item');
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function setRebuilding(on: boolean): void {
  el.rebuilding.hidden = !on;
  // While a returning user's inbox is rebuilt, look again every few
  // seconds, a bounded number of times.
  if (on && rebuildChecks < 40) {
    rebuildChecks++;
    setTimeout(() => void act(null, refreshTop), 3000);
  }
}

async function fetchInbox(first: number, after: string | null): Promise<InboxPage> {
  const d = await gql<{ inbox: InboxPage }>(INBOX, { first, after }, token);
  return d.inbox;
}

// loadInbox appends the next page (the first one after signing in). Items
// that live events brought meanwhile stay where they are.
async function loadInbox(): Promise<void> {
  const page = await fetchInbox(PAGE, nextCursor);
  for (const e of page.edges) {
    if (!shown.has(e.node.id)) append(e);
  }
  nextCursor = page.pageInfo.endCursor ?? nextCursor;
  hasMore = page.pageInfo.hasNextPage;
  el.inbox.dataset.loaded = 'yes';
  afterChange();
  setCounts(page.unreadCount, page.totalCount);
  setRebuilding(page.rebuilding);
}

// refreshTop brings in the newest page's items not shown yet, each in its
// place, without dropping pages loaded further down.
async function refreshTop(): Promise<void> {
  const page = await fetchInbox(PAGE, null);
  for (const e of page.edges) {
    if (shown.has(e.node.id)) updateText(e.node);
    else insertInOrder(e);
  }
  if (shown.size <= page.edges.length) {
    nextCursor = page.pageInfo.endCursor;
    hasMore = page.pageInfo.hasNextPage;
  }
  afterChange();
  setCounts(page.unreadCount, page.totalCount);
  setRebuilding(page.rebuilding);
}

function itemOf(id: string): HTMLElement | null {
  return el.inbox.querySelector<HTMLElement>(`li[data-id="${CSS.escape(id)}"]`);
}

// remember records e's message as shown, and whose repost it is.
function remember(e: Edge): void {
  shown.set(e.node.id, e.node);
  if (e.repostedBy) reposts.set(e.node.id, { by: e.repostedBy, at: e.deliveredAt });
  else reposts.delete(e.node.id);
}

// placeOf is the time that places m in the timeline: a repost's, for a
// message shown as someone's repost.
function placeOf(m: Message): number {
  return Date.parse(reposts.get(m.id)?.at ?? m.createdAt);
}

function append(e: Edge): void {
  remember(e);
  el.inbox.append(inboxItem(e.node));
}

function inboxItem(m: Message): HTMLLIElement {
  return messageItem(m, 'inbox-item', reposts.get(m.id)?.by.handle);
}

// insertInOrder puts m among the shown items, newest first. A message older
// than every shown one waits for "load more" when more pages exist, so the
// list never skips items.
function insertInOrder(e: Edge): void {
  const m = e.node;
  if (shown.has(m.id)) return updateText(m);
  const t = Date.parse(e.repostedBy ? e.deliveredAt : m.createdAt);
  for (const li of el.inbox.children) {
    const other = shown.get((li as HTMLElement).dataset.id ?? '');
    if (other && placeOf(other) < t) {
      remember(e);
      li.before(inboxItem(m));
      afterChange();
      return;
    }
  }
  if (!hasMore) {
    append(e);
    afterChange();
  }
}

function updateText(m: Message): void {
  if (shown.has(m.id)) shown.set(m.id, m);
  for (const list of [el.inbox, el.mine]) {
    const li = list.querySelector<HTMLElement>(`li[data-id="${CSS.escape(m.id)}"]`);
    li?.replaceWith(list === el.inbox ? inboxItem(m) : messageItem(m, 'my-message', li.dataset.repostedBy));
  }
}

function remove(id: string): void {
  shown.delete(id);
  reposts.delete(id);
  itemOf(id)?.remove();
}

function afterChange(): void {
  el.inboxEmpty.hidden = shown.size > 0;
  el.loadMore.hidden = !hasMore;
}

el.loadMore.addEventListener('click', () => void act(el.loadMore, loadInbox));

el.markRead.addEventListener('click', () =>
  void act(el.markRead, async () => {
    const d = await gql<{ markInboxRead: number }>('mutation { markInboxRead }', {}, token);
    el.unread.textContent = String(d.markInboxRead);
    el.unread.hidden = d.markInboxRead === 0;
  }),
);

// ---- messages ----

function formatTime(iso: string): string {
  return new Date(iso).toLocaleString();
}

// messageItem renders m, as reposted by the user of handle repostedBy if
// set; the viewer's own messages can be edited and deleted in place,
// others' replied to, and every message liked and reposted.
function messageItem(m: Message, testid: string, repostedBy?: string): HTMLLIElement {
  const own = m.author.id === viewer?.id;
  const text = h('p', { class: 'text', 'data-testid': 'message-text' }, m.text);
  const actions = h('div', { class: 'actions' });
  const like = h(
    'button',
    {
      type: 'button',
      'data-testid': 'like',
      'aria-pressed': String(m.viewerHasLiked),
      'aria-label': m.viewerHasLiked ? 'Unlike' : 'Like',
    },
    `${m.viewerHasLiked ? '♥' : '♡'} ${m.likeCount}`,
  );
  like.addEventListener('click', () =>
    void act(like, async () => {
      const field = m.viewerHasLiked ? 'unlike' : 'like';
      const d = await gql<Record<string, Message>>(
        `mutation($id: ID!) { ${field}(messageId: $id) { ...Msg } } ${MESSAGE}`,
        { id: m.id },
        token,
      );
      updateText(d[field]);
    }),
  );
  const repost = h(
    'button',
    {
      type: 'button',
      'data-testid': 'repost',
      'aria-pressed': String(m.viewerHasReposted),
      'aria-label': m.viewerHasReposted ? 'Undo repost' : 'Repost',
    },
    `↻ ${m.repostCount}`,
  );
  repost.addEventListener('click', () =>
    void act(repost, async () => {
      const field = m.viewerHasReposted ? 'unrepost' : 'repost';
      const d = await gql<Record<string, Message>>(
        `mutation($id: ID!) { ${field}(messageId: $id) { ...Msg } } ${MESSAGE}`,
        { id: m.id },
        token,
      );
      updateText(d[field]);
      await loadMine();
    }),
  );
  actions.append(like, repost);
  if (m.replyCount > 0) {
    // The thread below this message: its direct replies, oldest first, each
    // able to open its own.
    const thread = h('button', { type: 'button', 'data-testid': 'show-replies', 'aria-expanded': 'false' }, `💬 ${m.replyCount}`);
    thread.addEventListener('click', () =>
      void act(thread, async () => {
        const open = li.querySelector(':scope > ul.replies');
        if (open) {
          open.remove();
          thread.setAttribute('aria-expanded', 'false');
          return;
        }
        const d = await gql<{ node: { replies: { edges: { node: Message }[] } } | null }>(
          `query($id: ID!) { node(id: $id) { ... on Message { replies(first: 20) { edges { node { ...Msg } } } } } } ${MESSAGE}`,
          { id: m.id },
          token,
        );
        const list = h('ul', { class: 'messages replies', 'data-testid': 'replies' });
        for (const e of d.node?.replies.edges ?? []) list.append(messageItem(e.node, 'reply-item'));
        li.append(list);
        thread.setAttribute('aria-expanded', 'true');
      }),
    );
    actions.append(thread);
  }
  const li = h(
    'li',
    { class: 'message', 'data-testid': testid, 'data-id': m.id, 'data-reposted-by': repostedBy },
    repostedBy ? h('p', { class: 'reposted-by', 'data-testid': 'reposted-by' }, `↻ reposted by @${repostedBy}`) : null,
    h(
      'p',
      { class: 'byline' },
      h('strong', {}, m.author.displayName),
      ` @${m.author.handle} · `,
      h('time', { datetime: m.createdAt }, formatTime(m.createdAt)),
      m.editedAt ? h('span', { class: 'edited', 'data-testid': 'edited' }, ' · edited') : null,
    ),
    m.replyTo ? h('p', { class: 'reply-to' }, `↪ replying to @${m.replyTo.author.handle}: ${m.replyTo.text}`) : null,
    text,
    m.mentions.length > 0
      ? h('p', { class: 'mentions', 'data-testid': 'mentions' }, `mentions ${m.mentions.map((u) => '@' + u.handle).join(', ')}`)
      : null,
    actions,
  );
  if (own) {
    const edit = h('button', { type: 'button', 'data-testid': 'edit', 'aria-label': 'Edit message' }, 'Edit');
    const del = h('button', { type: 'button', 'data-testid': 'delete', 'aria-label': 'Delete message' }, 'Delete');
    edit.addEventListener('click', () => startEdit(li, m));
    del.addEventListener('click', () =>
      void act(del, async () => {
        await gql('mutation($id: ID!) { deleteMessage(id: $id) }', { id: m.id }, token);
        li.remove();
        if (shown.has(m.id)) remove(m.id);
      }),
    );
    actions.append(edit, del);
  } else {
    const reply = h('button', { type: 'button', 'data-testid': 'reply' }, 'Reply');
    reply.addEventListener('click', () => setReplyTo(m));
    actions.append(reply);
  }
  return li;
}

function startEdit(li: HTMLLIElement, m: Message): void {
  const area = h('textarea', { 'aria-label': 'New text', rows: '3', maxlength: '5000', required: true, 'data-testid': 'edit-text' });
  area.value = m.text;
  const save = h('button', { type: 'submit', 'data-testid': 'save' }, 'Save');
  const cancel = h('button', { type: 'button', 'data-testid': 'cancel' }, 'Cancel');
  const form = h('form', { class: 'edit' }, area, save, cancel);
  cancel.addEventListener('click', () => form.replaceWith(messageItem(m, li.dataset.testid ?? 'my-message')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void act(save, async () => {
      const d = await gql<{ editMessage: Message }>(
        `mutation($id: ID!, $text: String!) { editMessage(id: $id, text: $text) { ...Msg } } ${MESSAGE}`,
        { id: m.id, text: area.value },
        token,
      );
      form.replaceWith(messageItem(d.editMessage, li.dataset.testid ?? 'my-message'));
    });
  });
  li.replaceWith(form);
  area.focus();
}

async function loadMine(): Promise<void> {
  const d = await gql<{ viewer: { messages: { edges: { node: Message & { repostOf: Message | null } }[] } } | null }>(
    `{ viewer { messages(first: ${PAGE}) { edges { node { ...Msg repostOf { ...Msg } } } } } } ${MESSAGE}`,
    {},
    token,
  );
  // A repost shows as the message reposted; one whose message is gone
  // shows nothing.
  const items = (d.viewer?.messages.edges ?? []).flatMap(({ node }) =>
    node.kind !== 'REPOST' ? [messageItem(node, 'my-message')] : node.repostOf && viewer ? [messageItem(node.repostOf, 'my-message', viewer.handle)] : [],
  );
  el.mine.replaceChildren(...items);
}

function setReplyTo(m: Message | null): void {
  replyTo = m;
  el.replying.hidden = !m;
  el.replyingText.textContent = m ? `Replying to @${m.author.handle}: ${m.text}` : '';
  if (m) el.composeText.focus();
}

el.cancelReply.addEventListener('click', () => setReplyTo(null));

el.compose.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const button = (ev as SubmitEvent).submitter as HTMLButtonElement | null;
  void act(button, async () => {
    const input: Record<string, string> = { text: el.composeText.value };
    if (replyTo) input.replyTo = replyTo.id;
    const d = await gql<{ postMessage: Message }>(
      `mutation($input: PostMessageInput!) { postMessage(input: $input) { ...Msg } } ${MESSAGE}`,
      { input },
      token,
    );
    el.composeText.value = '';
    setReplyTo(null);
    el.mine.prepend(messageItem(d.postMessage, 'my-message'));
  });
});

// ---- profile ----

function fillProfile(p: Profile): void {
  const field = (name: string) => el.profileForm.elements.namedItem(name) as HTMLInputElement | HTMLTextAreaElement;
  field('displayName').value = p.displayName;
  field('bio').value = p.bio ?? '';
  field('websiteUrl').value = p.websiteUrl ?? '';
  field('avatarUrl').value = p.avatarUrl ?? '';
}

// profileProblem words a refused profile for the person editing it; null
// for errors the page handles as any other (a session that ended).
function profileProblem(err: unknown): string | null {
  if (!(err instanceof ApiError)) return 'Your profile could not be saved; try again.';
  switch (err.code) {
    case 'BAD_USER_INPUT':
      return `Please check your profile: the ${err.message}.`;
    case 'RATE_LIMITED':
      return 'You are saving too often; wait a moment and try again.';
    case 'UNAUTHENTICATED':
      return null;
    default:
      return `Your profile could not be saved (${err.message}); try again.`;
  }
}

el.profileForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const button = (ev as SubmitEvent).submitter as HTMLButtonElement | null;
  const f = new FormData(el.profileForm);
  const input: Record<string, string> = {};
  for (const k of ['displayName', 'bio', 'websiteUrl', 'avatarUrl']) input[k] = String(f.get(k) ?? '').trim();
  el.profileError.hidden = true;
  el.profileSaved.hidden = true;
  void act(button, async () => {
    let d: { updateProfile: Profile };
    try {
      d = await gql<{ updateProfile: Profile }>(
        `mutation($input: UpdateProfileInput!) { updateProfile(input: $input) { ${PROFILE} } }`,
        { input },
        token,
      );
    } catch (err) {
      const problem = profileProblem(err);
      if (!problem) throw err;
      el.profileError.textContent = problem;
      el.profileError.hidden = false;
      return;
    }
    const p = d.updateProfile;
    viewer = p;
    el.viewer.textContent = `${p.displayName} (@${p.handle})`;
    fillProfile(p);
    el.profileSaved.hidden = false;
    // The viewer's messages on the page show the new name.
    for (const m of [...shown.values()]) {
      if (m.author.id === p.id) updateText({ ...m, author: { ...m.author, displayName: p.displayName } });
    }
    await loadMine();
  });
});

// ---- people ----

function renderFound(u: FoundUser): void {
  const isViewer = u.id === viewer?.id;
  const button = h(
    'button',
    { type: 'button', 'data-testid': 'follow-toggle', hidden: isViewer },
    u.viewerFollows ? 'Unfollow' : 'Follow',
  );
  button.addEventListener('click', () =>
    void act(button, async () => {
      const op = u.viewerFollows ? 'unfollow' : 'follow';
      const d = await gql<Record<string, FoundUser>>(`mutation($id: ID!) { ${op}(userId: $id) { ${USER} } }`, { id: u.id }, token);
      renderFound(d[op]);
      // Unfollowing takes the author's items out of the timeline.
      if (op === 'unfollow') {
        for (const m of [...shown.values()]) {
          const by = reposts.get(m.id)?.by;
          if (by ? by.id === u.id : m.author.id === u.id) remove(m.id);
        }
        afterChange();
      }
    }),
  );
  el.found.replaceChildren(
    h(
      'div',
      {},
      u.avatarUrl ? h('img', { class: 'avatar', src: u.avatarUrl, alt: '', referrerpolicy: 'no-referrer', 'data-testid': 'found-avatar' }) : null,
      h('p', {}, h('strong', { 'data-testid': 'found-name' }, u.displayName), ` @${u.handle}`),
      u.bio ? h('p', { class: 'bio', 'data-testid': 'found-bio' }, u.bio) : null,
      u.websiteUrl
        ? h('p', {}, h('a', { href: u.websiteUrl, rel: 'nofollow noopener noreferrer', target: '_blank', 'data-testid': 'found-website' }, u.websiteUrl))
        : null,
    ),
    h(
      'p',
      { class: 'meta', 'data-testid': 'found-counts' },
      `${plural(u.followerCount, 'follower')} · ${u.followingCount} following · ${plural(u.messageCount, 'message')}`,
    ),
    button,
  );
  el.found.hidden = false;
}

el.findForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const button = (ev as SubmitEvent).submitter as HTMLButtonElement | null;
  const handle = String(new FormData(el.findForm).get('handle')).trim();
  void act(button, async () => {
    const d = await gql<{ user: FoundUser | null }>(`query($h: String!) { user(handle: $h) { ${USER} } }`, { h: handle }, token);
    if (!d.user) {
      el.found.hidden = true;
      throw new ApiError('NOT_FOUND', `nobody has the handle @${handle}`);
    }
    renderFound(d.user);
  });
});

// ---- search ----

// The typeahead asks once the typing pauses, and shows only the answer to
// the latest query: an older one that arrives late is dropped.
const SEARCH_DELAY_MS = 200;
let searchTimer: ReturnType<typeof setTimeout> | undefined;
let searchSeq = 0;

function searchResult(u: FoundUser): HTMLLIElement {
  const follow = h('button', { type: 'button', 'data-testid': 'search-follow', hidden: u.id === viewer?.id }, u.viewerFollows ? 'Unfollow' : 'Follow');
  follow.addEventListener('click', () =>
    void act(follow, async () => {
      const op = u.viewerFollows ? 'unfollow' : 'follow';
      const d = await gql<Record<string, FoundUser>>(`mutation($id: ID!) { ${op}(userId: $id) { ${USER} } }`, { id: u.id }, token);
      li.replaceWith(searchResult(d[op]));
    }),
  );
  const li = h(
    'li',
    { 'data-testid': 'search-result' },
    h('strong', {}, u.displayName),
    ` @${u.handle} · ${plural(u.followerCount, 'follower')} `,
    follow,
  );
  return li;
}

el.search.addEventListener('input', () => {
  clearTimeout(searchTimer);
  const q = el.search.value.trim();
  const seq = ++searchSeq;
  if (!/[\p{L}\p{N}_]/u.test(q)) {
    el.searchResults.replaceChildren();
    return;
  }
  searchTimer = setTimeout(
    () =>
      void act(null, async () => {
        const d = await gql<{ searchUsers: { edges: { node: FoundUser }[] } }>(
          `query($q: String!) { searchUsers(query: $q, first: 8) { edges { node { ${USER} } } } }`,
          { q },
          token,
        );
        if (seq !== searchSeq) return;
        const items = d.searchUsers.edges.map((e) => searchResult(e.node));
        el.searchResults.replaceChildren(...(items.length ? items : [h('li', { class: 'note' }, 'Nobody found.')]));
      }),
    SEARCH_DELAY_MS,
  );
});

void start();
