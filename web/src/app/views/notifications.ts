// The notifications tab: grouped activity ("alice and 2 others liked your
// post"), newest first, unread ones marked, kept current live.
import { subscribe } from '../api';
import { h, must, plural } from '../dom';
import { NOTIFICATIONS, NOTIFICATION_EVENTS } from '../queries';
import { act, q, session, showError } from '../session';
import { icon } from '../icons';
import { timeEl } from '../time';
import type { Connection, NotificationEvent, NotificationGroup } from '../types';
import { avatar, btn, empty, errorState, loading } from '../ui';

const root = must('view-notifications');
const tabBadge = must('notif-unread');
const markRead = btn('Mark all read', 'ghost', { 'data-testid': 'notif-mark-read', class: 'btn-sm', hidden: true });
const summary = h('p', { class: 'muted small', 'data-testid': 'notif-total' });
const state = h('div', { class: 'feed-state' });
const list = h('div', { class: 'feed', 'data-testid': 'notifications', 'aria-live': 'polite' });
const more = btn('Show older', 'secondary', { class: 'btn-block', 'data-testid': 'notif-more', hidden: true });

root.append(h('div', { class: 'view-head' }, h('div', { class: 'view-head-stack' }, h('h1', { id: 'notifications-title' }, 'Notifications'), summary), h('div', { class: 'row' }, markRead)), state, list, more);

let stop: (() => void) | null = null;
let last: string | null = null;
let after: string | null = null;

function setCounts(unread: number, total: number): void {
  tabBadge.textContent = unread > 99 ? '99+' : String(unread);
  tabBadge.setAttribute('aria-label', `${unread} unread`);
  tabBadge.hidden = unread === 0;
  markRead.hidden = unread === 0;
  summary.textContent = total === 0 ? '' : unread > 0 ? `${plural(unread, 'new notification')} · ${total} in all` : `${plural(total, 'notification')}, all read`;
}

const verbs: Record<string, [string, string]> = {
  FOLLOWED: ['followed you', 'follow'],
  LIKED: ['liked your post', 'heart'],
  REPOSTED: ['reposted your post', 'repost'],
  REPLIED: ['replied to you', 'reply'],
  MENTIONED: ['mentioned you', 'at'],
  FOLLOW_REQUESTED: ['asked to follow you', 'lock'],
};

function item(g: NotificationGroup): HTMLElement {
  const [verb, glyph] = verbs[g.kind] ?? ['did something', 'bell'];
  const first = g.latestActors[0];
  const others = g.count - 1;
  const who = h('span', {});
  if (first) {
    who.append(h('a', { href: `#/u/${first.handle}`, class: 'name-link' }, first.displayName));
    if (others > 0) who.append(` and ${plural(others, 'other')}`);
  } else who.append(plural(g.count, 'person', 'people'));
  const link =
    g.kind === 'FOLLOW_REQUESTED'
      ? h('a', { href: '#/settings', class: 'small' }, 'Review requests')
      : g.message
        ? h('a', { href: `#/m/${encodeURIComponent(g.message.id)}`, class: 'notif-quote', 'data-testid': 'notification-message' }, g.message.text)
        : null;
  return h(
    'article',
    { class: `notif${g.unread ? ' unread' : ''}`, 'data-testid': 'notification', 'data-id': g.id, 'data-kind': g.kind },
    h('span', { class: `notif-icon notif-${g.kind.toLowerCase()}`, 'aria-hidden': 'true' }, icon(glyph, g.kind === 'LIKED')),
    h(
      'div',
      { class: 'notif-body' },
      h('div', { class: 'notif-avatars' }, ...g.latestActors.map((a) => h('a', { href: `#/u/${a.handle}` }, avatar(a, 'sm')))),
      h('p', { class: 'notif-text' }, h('span', { 'data-testid': 'notification-text' }, who, ` ${verb}`), h('span', { class: 'dot', 'aria-hidden': 'true' }, '·'), timeEl(g.latestAt), h('span', { class: 'unread-dot', 'aria-label': 'unread', title: 'New' })),
      link,
    ),
  );
}

function afterChange(): void {
  if (list.children.length === 0) state.replaceChildren(empty('No notifications yet', "When people follow you, like, repost or reply to your posts, you'll see it here."));
  else state.replaceChildren();
}

async function load(): Promise<void> {
  state.replaceChildren(loading('Loading notifications…'));
  try {
    const d = await q<{ notifications: Connection<NotificationGroup> & { unreadCount: number } }>(NOTIFICATIONS, { first: 20, after: null });
    list.replaceChildren(...d.notifications.edges.map((e) => item(e.node)));
    after = d.notifications.pageInfo.endCursor;
    more.hidden = !d.notifications.pageInfo.hasNextPage;
    setCounts(d.notifications.unreadCount, d.notifications.totalCount);
    afterChange();
  } catch (err) {
    list.replaceChildren();
    state.replaceChildren(errorState(err, () => void load(), 'your notifications'));
  }
}

more.addEventListener('click', () =>
  void act(more, async () => {
    const d = await q<{ notifications: Connection<NotificationGroup> }>(NOTIFICATIONS, { first: 20, after });
    for (const e of d.notifications.edges) if (!list.querySelector(`[data-id="${CSS.escape(e.node.id)}"]`)) list.append(item(e.node));
    after = d.notifications.pageInfo.endCursor;
    more.hidden = !d.notifications.pageInfo.hasNextPage;
  }),
);

function onEvent(ev: NotificationEvent): void {
  setCounts(ev.unreadCount, ev.totalCount);
  switch (ev.type) {
    case 'ADDED':
      if (!ev.edge) break;
      // A group that gained an actor keeps its id: it moves to the top.
      list.querySelector(`[data-id="${CSS.escape(ev.edge.node.id)}"]`)?.remove();
      list.prepend(item(ev.edge.node));
      break;
    case 'READ':
      for (const n of list.querySelectorAll('.unread')) n.classList.remove('unread');
      break;
    default:
      // REMOVED, UPDATED or a type this client does not know yet: the feed
      // as the server has it now.
      void act(null, load);
  }
  afterChange();
}

function startLive(): void {
  stop?.();
  if (!session.token) return;
  stop = subscribe<{ notificationEvents: NotificationEvent }>(NOTIFICATION_EVENTS, session.token, () => ({ after: last }), {
    event: (d) => {
      last = d.notificationEvents.cursor;
      onEvent(d.notificationEvents);
    },
    error: (e) => {
      if (e.code !== 'RESUME_EXPIRED') return showError(e);
      last = null;
      startLive();
      void load();
    },
    state: () => {},
  });
}

markRead.addEventListener('click', () =>
  void act(markRead, async () => {
    const d = await q<{ markNotificationsRead: number }>('mutation { markNotificationsRead }');
    if (d.markNotificationsRead === 0) for (const n of list.querySelectorAll('.unread')) n.classList.remove('unread');
    tabBadge.textContent = String(d.markNotificationsRead);
    tabBadge.hidden = d.markNotificationsRead === 0;
    markRead.hidden = d.markNotificationsRead === 0;
  }),
);

export function startNotifications(): void {
  startLive();
  void load();
}

export function stopNotifications(): void {
  stop?.();
  stop = null;
  last = null;
  list.replaceChildren();
  state.replaceChildren();
  setCounts(0, 0);
}

// reloadNotifications reads the feed again (after a block, say).
export function reloadNotifications(): void {
  void act(null, load);
}
