// The home timeline: a composer, then the inbox (others' messages and
// one's own), newest first, kept current by inbox events.
import { subscribe, type LiveState } from '../api';
import { h, must } from '../dom';
import { INBOX, INBOX_EVENTS, MESSAGE } from '../queries';
import { act, bus, q, session, showError, showNotice } from '../session';
import type { Edge, InboxEvent, InboxPage, Message } from '../types';
import { messageCard } from '../message';
import { avatar, btn, empty, errorState, loading } from '../ui';

const PAGE = 20;
const root = must('view-home');
const tabBadge = must('unread');

const live = h('span', { class: 'live', 'data-testid': 'live-status', 'data-state': 'connecting' }, 'Connecting…');
const markRead = btn('Mark all read', 'ghost', { 'data-testid': 'mark-read', class: 'btn-sm', hidden: true });
const composeText = h('textarea', {
  id: 'compose-text',
  class: 'input composer-input',
  name: 'text',
  rows: '2',
  maxlength: '5000',
  required: true,
  placeholder: "What's happening?",
  'data-testid': 'compose-text',
  'aria-label': 'New post',
});
const chars = h('span', { class: 'muted small', 'aria-live': 'polite' });
const post = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'post' }, 'Post');
const composeAvatar = h('span', { class: 'composer-avatar' });
const compose = h('form', { class: 'card composer', 'data-testid': 'compose' }, composeAvatar, h('div', { class: 'composer-main' }, composeText, h('div', { class: 'row row-between' }, chars, post)));
const rebuilding = h('p', { class: 'banner', 'data-testid': 'rebuilding', hidden: true }, 'Welcome back! Your timeline is being rebuilt; more posts will appear shortly.');
const state = h('div', { class: 'feed-state' });
const feed = h('div', { class: 'feed', 'data-testid': 'inbox', 'aria-live': 'polite' });
const loadMore = btn('Show older posts', 'secondary', { 'data-testid': 'load-more', class: 'btn-block', hidden: true });

root.append(
  h('div', { class: 'view-head' }, h('h1', { id: 'home-title' }, 'Home'), h('div', { class: 'row' }, live, markRead)),
  compose,
  rebuilding,
  state,
  feed,
  loadMore,
);

// The inbox as shown: its messages by id, and for a repost who reposted it
// and when it arrived, which is its place.
const shown = new Map<string, Message>();
const reposts = new Map<string, { by: { id: string; handle: string }; at: string }>();
let nextCursor: string | null = null;
let hasMore = false;
let loaded = false;
let unread = 0;
let rebuildChecks = 0;
let stopLive: (() => void) | null = null;
let lastEvent: string | null = null;

function setUnread(n: number): void {
  unread = n;
  tabBadge.textContent = n > 99 ? '99+' : String(n);
  tabBadge.setAttribute('aria-label', `${n} unread`);
  tabBadge.hidden = n === 0;
  markRead.hidden = n === 0;
  markUnread();
}

// markUnread marks the newest `unread` items that others sent: the ones
// delivered since the read mark (one's own are never unread).
function markUnread(): void {
  let left = unread;
  for (const card of feed.querySelectorAll<HTMLElement>(':scope > article.msg')) {
    const m = shown.get(card.dataset.id ?? '');
    const others = !!m && (m.author.id !== session.viewer?.id || reposts.has(m.id));
    const on = others && left > 0;
    if (on) left--;
    card.classList.toggle('unread', on);
  }
}

function card(m: Message): HTMLElement {
  return messageCard(m, 'inbox-item', { repostedBy: reposts.get(m.id)?.by.handle });
}

function remember(e: Edge): void {
  shown.set(e.node.id, e.node);
  if (e.repostedBy) reposts.set(e.node.id, { by: e.repostedBy, at: e.deliveredAt });
  else reposts.delete(e.node.id);
}

function placeOf(m: Message): number {
  return Date.parse(reposts.get(m.id)?.at ?? m.createdAt);
}

function afterChange(): void {
  loadMore.hidden = !hasMore;
  if (!loaded) return;
  if (shown.size === 0) {
    const search = h('a', { class: 'btn btn-primary', href: '#/search' }, 'Find people to follow');
    state.replaceChildren(empty('Your timeline is empty', 'Post something, or follow people to see their posts here.', search));
  } else state.replaceChildren();
  markUnread();
}

// insertInOrder puts e among the shown items, newest first. An item older
// than every shown one waits for "show older" when more pages exist, so
// the list never skips items.
function insertInOrder(e: Edge): void {
  if (shown.has(e.node.id)) {
    shown.set(e.node.id, e.node);
    return;
  }
  const t = Date.parse(e.repostedBy ? e.deliveredAt : e.node.createdAt);
  for (const c of feed.querySelectorAll<HTMLElement>(':scope > article.msg')) {
    const other = shown.get(c.dataset.id ?? '');
    if (other && placeOf(other) < t) {
      remember(e);
      c.before(card(e.node));
      afterChange();
      return;
    }
  }
  if (!hasMore) {
    remember(e);
    feed.append(card(e.node));
    afterChange();
  }
}

function remove(id: string): void {
  shown.delete(id);
  reposts.delete(id);
  feed.querySelector(`:scope > article.msg[data-id="${CSS.escape(id)}"]`)?.remove();
}

async function fetchInbox(after: string | null): Promise<InboxPage> {
  return (await q<{ inbox: InboxPage }>(INBOX, { first: PAGE, after })).inbox;
}

function setRebuilding(on: boolean): void {
  rebuilding.hidden = !on;
  if (on && rebuildChecks < 40) {
    rebuildChecks++;
    setTimeout(() => void act(null, refreshTop), 3000);
  }
}

async function loadPage(): Promise<void> {
  const page = await fetchInbox(nextCursor);
  for (const e of page.edges) {
    if (!shown.has(e.node.id)) {
      remember(e);
      feed.append(card(e.node));
    }
  }
  nextCursor = page.pageInfo.endCursor ?? nextCursor;
  hasMore = page.pageInfo.hasNextPage;
  loaded = true;
  afterChange();
  setUnread(page.unreadCount);
  setRebuilding(page.rebuilding);
}

async function loadFirst(): Promise<void> {
  state.replaceChildren(loading('Loading your timeline…'));
  try {
    await loadPage();
  } catch (err) {
    state.replaceChildren(errorState(err, () => void loadFirst(), 'your timeline'));
  }
}

// refreshTop brings in the newest page's items not shown yet, each in its
// place, without dropping pages loaded further down.
async function refreshTop(): Promise<void> {
  const page = await fetchInbox(null);
  for (const e of page.edges) {
    if (shown.has(e.node.id)) bus.dispatchEvent(new CustomEvent('message', { detail: e.node }));
    else insertInOrder(e);
  }
  if (shown.size <= page.edges.length) {
    nextCursor = page.pageInfo.endCursor;
    hasMore = page.pageInfo.hasNextPage;
  }
  loaded = true;
  afterChange();
  setUnread(page.unreadCount);
  setRebuilding(page.rebuilding);
}

const liveWords: Record<LiveState, string> = { connecting: 'Connecting…', live: 'Live', offline: 'Offline' };

function startLive(): void {
  stopLive?.();
  if (!session.token) return;
  stopLive = subscribe<{ inboxEvents: InboxEvent }>(INBOX_EVENTS, session.token, () => ({ after: lastEvent }), {
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
    state: (s) => {
      live.textContent = liveWords[s];
      live.dataset.state = s;
      if (s === 'live' && lastEvent === null && loaded) void act(null, refreshTop);
    },
  });
}

function onEvent(ev: InboxEvent): void {
  switch (ev.type) {
    case 'ADDED':
      if (ev.edge) insertInOrder(ev.edge);
      break;
    case 'EDITED':
      if (ev.message) bus.dispatchEvent(new CustomEvent('message', { detail: ev.message }));
      break;
    case 'DELETED':
    case 'REMOVED': {
      const id = ev.deletedMessageId ?? ev.removedMessageId;
      if (id) remove(id);
      afterChange();
      break;
    }
    case 'READ':
      break;
    default:
      // A type this client does not know: read the top again.
      void act(null, refreshTop);
  }
  setUnread(ev.unreadCount);
}

bus.addEventListener('message', (ev) => {
  const m = (ev as CustomEvent<Message>).detail;
  if (shown.has(m.id)) shown.set(m.id, m);
});
bus.addEventListener('deleted', (ev) => {
  remove((ev as CustomEvent<string>).detail);
  afterChange();
});
// Unfollowing, blocking or muting someone takes their items out.
bus.addEventListener('userGone', (ev) => {
  const id = (ev as CustomEvent<string>).detail;
  for (const m of [...shown.values()]) {
    const by = reposts.get(m.id)?.by;
    if (by ? by.id === id : m.author.id === id) remove(m.id);
  }
  afterChange();
});
bus.addEventListener('userBack', () => void act(null, refreshTop));

markRead.addEventListener('click', () =>
  void act(markRead, async () => {
    const d = await q<{ markInboxRead: number }>('mutation { markInboxRead }');
    setUnread(d.markInboxRead);
  }),
);

loadMore.addEventListener('click', () => void act(loadMore, loadPage));

// Ctrl-Enter (or ⌘-Enter) posts, as in most apps.
composeText.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    compose.requestSubmit(post);
  }
});

composeText.addEventListener('input', () => {
  const n = composeText.value.length;
  chars.textContent = n > 4500 ? `${5000 - n} left` : '';
});

compose.addEventListener('submit', (ev) => {
  ev.preventDefault();
  void act(post, async () => {
    const d = await q<{ postMessage: Message }>(`mutation($input: PostMessageInput!) { postMessage(input: $input) { ...Msg } } ${MESSAGE}`, { input: { text: composeText.value } });
    composeText.value = '';
    chars.textContent = '';
    // One's own post is home at once; its ADDED event finds it there.
    insertInOrder({ cursor: '', deliveredAt: d.postMessage.createdAt, repostedBy: null, node: d.postMessage });
    showNotice('Posted.');
  });
});

export function startHome(): void {
  composeAvatar.replaceChildren(session.viewer ? avatar(session.viewer, 'md') : '');
  startLive();
  void loadFirst();
}

export function stopHome(): void {
  stopLive?.();
  stopLive = null;
  lastEvent = null;
  shown.clear();
  reposts.clear();
  nextCursor = null;
  hasMore = false;
  loaded = false;
  rebuildChecks = 0;
  feed.replaceChildren();
  state.replaceChildren();
  setUnread(0);
  live.textContent = liveWords.connecting;
}

// ownNameChanged shows the viewer's new name on their shown messages.
export function ownProfileChanged(): void {
  const v = session.viewer;
  if (!v) return;
  for (const m of [...shown.values()]) {
    if (m.author.id === v.id) bus.dispatchEvent(new CustomEvent('message', { detail: { ...m, author: { ...m.author, displayName: v.displayName, avatarUrl: v.avatarUrl } } }));
  }
  composeAvatar.replaceChildren(avatar(v, 'md'));
}
