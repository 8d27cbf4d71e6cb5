// The messages tab: the viewer's conversations (direct ones and groups),
// an open conversation as a chat, and starting new ones:
//
//   #/messages               the conversation list
//   #/messages/<id>          a conversation
//   #/messages/new           pick someone to message
//   #/messages/to/<handle>   a direct conversation with someone (the
//                            existing one, or a first message)
//   #/messages/group         a new group
//
// One conversationEvents subscription, open while signed in, keeps the
// tab's unread badge, the list and the open conversation current.
import { ApiError, subscribe } from '../api';
import { h, must, plural } from '../dom';
import { friendly } from '../errors';
import { icon } from '../icons';
import { CONVERSATION, CONVERSATIONS, CONVERSATION_EVENTS, CONVERSATION_OLDER, CONV_FULL, CONV_MESSAGE, PROFILE, USER, USER_REF } from '../queries';
import { act, q, session, showError, showNotice } from '../session';
import { timeEl } from '../time';
import type { Connection, ConvFull, ConvMessage, ConvSummary, ConversationEvent, User, UserRef } from '../types';
import { avatar, btn, confirmDialog, empty, errorState, loading } from '../ui';

const tabBadge = must('msg-unread');

let stop: (() => void) | null = null;
let last: string | null = null;

// The view shown, if any, gets every event; it is dropped once its
// element leaves the page (another route replaced it).
interface Live {
  root: HTMLElement;
  event(ev: ConversationEvent): void;
  reload(): void;
}
let shown: Live | null = null;

function setBadge(n: number): void {
  tabBadge.textContent = n > 99 ? '99+' : String(n);
  tabBadge.setAttribute('aria-label', `${n} unread`);
  tabBadge.hidden = n === 0;
}

async function refreshBadge(): Promise<void> {
  setBadge((await q<{ conversationsUnreadCount: number }>('{ conversationsUnreadCount }')).conversationsUnreadCount);
}

function startLive(): void {
  stop?.();
  if (!session.token) return;
  stop = subscribe<{ conversationEvents: ConversationEvent }>(CONVERSATION_EVENTS, session.token, () => ({ after: last }), {
    event: (d) => {
      const ev = d.conversationEvents;
      last = ev.cursor;
      setBadge(ev.unreadCount);
      if (shown && !shown.root.isConnected) shown = null;
      shown?.event(ev);
    },
    error: (e) => {
      if (e.code !== 'RESUME_EXPIRED') return showError(e);
      // Events were missed: read everything again, then follow from now.
      last = null;
      startLive();
      void act(null, refreshBadge);
      if (shown?.root.isConnected) shown.reload();
    },
    // Shown to tests (and styles) on the tab: whether events arrive.
    state: (st) => (tabBadge.parentElement!.dataset.live = st),
  });
}

export function startMessages(): void {
  startLive();
  void act(null, refreshBadge);
}

export function stopMessages(): void {
  stop?.();
  stop = null;
  last = null;
  shown = null;
  setBadge(0);
}

export function renderMessages(box: HTMLElement, arg: string | undefined, sub: string | undefined): void {
  shown = null;
  if (!arg) return renderList(box);
  if (arg === 'new') return renderNew(box);
  if (arg === 'group') return renderNewGroup(box);
  if (arg === 'to') return renderTo(box, (sub ?? '').toLowerCase());
  renderConversation(box, arg);
}

// ---- shared pieces ----

function title(c: ConvSummary): string {
  if (c.isGroup) return c.name ?? 'Group';
  return c.peer ? c.peer.displayName : 'Deleted account';
}

function convAvatar(c: ConvSummary): HTMLElement {
  if (c.peer) return avatar(c.peer, 'md');
  const name = c.name ?? 'group';
  return avatar({ id: c.id, handle: name.toLowerCase(), displayName: name, avatarUrl: null }, 'md');
}

function preview(c: ConvSummary): string {
  const m = c.lastMessage;
  if (!m) return 'No messages yet';
  const who = m.author?.id === session.viewer?.id ? 'You: ' : c.isGroup && m.author ? `${m.author.displayName}: ` : '';
  return who + (m.deleted ? 'message deleted' : m.text);
}

function head(titleText: string | Node, subtitle?: Node | string | null, ...actions: Node[]): HTMLElement {
  return h(
    'div',
    { class: 'view-head' },
    h(
      'div',
      { class: 'view-head view-head-start' },
      h('a', { class: 'btn btn-ghost btn-icon', href: '#/messages', 'aria-label': 'Back to messages', 'data-testid': 'messages-back' }, icon('back')),
      h('div', { class: 'view-head-stack' }, h('h1', { 'data-testid': 'conversation-title' }, titleText), subtitle ? h('p', { class: 'muted small' }, subtitle) : null),
    ),
    h('div', { class: 'row' }, ...actions),
  );
}

// userPicker is the search's typeahead for choosing people: pick gets the
// user chosen; the results leave out those skip says no to.
function userPicker(pick: (u: User) => void, skip: (u: User) => boolean = () => false, placeholder = 'Search people by name or handle'): HTMLElement {
  const input = h('input', { class: 'input input-search', type: 'search', autocomplete: 'off', maxlength: '64', placeholder, 'aria-label': placeholder, 'data-testid': 'user-picker' });
  const results = h('ul', { class: 'list card picker-results', 'data-testid': 'picker-results', hidden: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let seq = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    const query = input.value.trim();
    const mine = ++seq;
    if (!/[\p{L}\p{N}_]/u.test(query)) {
      results.hidden = true;
      return;
    }
    timer = setTimeout(async () => {
      try {
        const d = await q<{ searchUsers: Connection<User> }>(`query($q: String!) { searchUsers(query: $q, first: 8) { totalCount edges { cursor node { ${USER} } } pageInfo { hasNextPage endCursor } } }`, { q: query });
        // Only the answer to the latest query is shown.
        if (mine !== seq) return;
        const users = d.searchUsers.edges.map((e) => e.node).filter((u) => u.id !== session.viewer?.id && !skip(u));
        results.replaceChildren(
          ...users.map((u) => {
            const b = h('button', { type: 'button', class: 'picker-item', 'data-testid': 'picker-result', 'data-handle': u.handle }, avatar(u, 'sm'), h('span', {}, u.displayName), h('span', { class: 'handle' }, ` @${u.handle}`));
            b.addEventListener('click', () => {
              input.value = '';
              results.hidden = true;
              pick(u);
            });
            return h('li', {}, b);
          }),
        );
        if (users.length === 0) results.replaceChildren(h('li', { class: 'muted small picker-none' }, `Nobody matches “${query}”`));
        results.hidden = false;
      } catch (err) {
        if (mine === seq) showError(err);
      }
    }, 200);
  });
  return h('div', { class: 'picker' }, input, results);
}

// ---- the conversation list ----

function row(c: ConvSummary): HTMLElement {
  return h(
    'li',
    {},
    h(
      'a',
      { class: `conv-row${c.unreadCount > 0 ? ' unread' : ''}`, href: `#/messages/${encodeURIComponent(c.id)}`, 'data-testid': 'conversation-row', 'data-id': c.id },
      convAvatar(c),
      h(
        'div',
        { class: 'conv-row-body' },
        h('div', { class: 'conv-row-top' }, h('strong', { class: 'conv-row-title', 'data-testid': 'conversation-name' }, title(c)), c.isGroup ? h('span', { class: 'muted small' }, ` · ${plural(c.memberCount, 'member')}`) : null, c.lastMessage ? timeEl(c.lastMessage.createdAt) : null),
        h('p', { class: `conv-row-preview${c.lastMessage?.deleted ? ' deleted' : ''}`, 'data-testid': 'conversation-preview' }, preview(c)),
      ),
      c.unreadCount > 0 ? h('span', { class: 'badge conv-unread', 'data-testid': 'conversation-unread', 'aria-label': `${c.unreadCount} unread` }, String(c.unreadCount)) : null,
    ),
  );
}

function renderList(box: HTMLElement): void {
  const list = h('ul', { class: 'list card conv-list', 'data-testid': 'conversations' });
  const state = h('div', { class: 'feed-state' });
  const more = btn('Show older', 'secondary', { class: 'btn-block', 'data-testid': 'conversations-more', hidden: true });
  box.replaceChildren(
    h(
      'div',
      { class: 'view-head' },
      h('h1', {}, 'Messages'),
      h('div', { class: 'row' }, h('a', { class: 'btn btn-secondary', href: '#/messages/group', 'data-testid': 'new-group' }, 'New group'), h('a', { class: 'btn btn-primary', href: '#/messages/new', 'data-testid': 'new-message' }, 'New message')),
    ),
    state,
    list,
    more,
  );
  let after: string | null = null;
  const load = async (older: boolean): Promise<void> => {
    const d = await q<{ conversations: Connection<ConvSummary>; conversationsUnreadCount: number }>(CONVERSATIONS, { after: older ? after : null });
    const rows = d.conversations.edges.map((e) => row(e.node));
    if (older) {
      for (const r of rows) if (!list.querySelector(`[data-id="${CSS.escape(r.firstElementChild!.getAttribute('data-id')!)}"]`)) list.append(r);
    } else list.replaceChildren(...rows);
    after = d.conversations.pageInfo.endCursor;
    more.hidden = !d.conversations.pageInfo.hasNextPage;
    setBadge(d.conversationsUnreadCount);
    list.hidden = list.children.length === 0;
    state.replaceChildren(list.hidden ? empty('No messages yet', 'Message someone from their profile, or start a conversation here.') : '');
  };
  const first = async () => {
    state.replaceChildren(loading('Loading conversations…'));
    try {
      await load(false);
    } catch (err) {
      state.replaceChildren(errorState(err, () => void first(), 'your conversations'));
    }
  };
  more.addEventListener('click', () => void act(more, () => load(true)));
  // Any event can reorder the list or change a preview or count: the
  // first page is read again, once for a burst of events.
  let timer: ReturnType<typeof setTimeout> | undefined;
  shown = {
    root: list,
    event: () => {
      clearTimeout(timer);
      timer = setTimeout(() => void act(null, () => load(false)), 150);
    },
    reload: () => void first(),
  };
  void first();
}

// ---- a new direct conversation ----

function renderNew(box: HTMLElement): void {
  const picker = userPicker((u) => (location.hash = `#/messages/to/${u.handle}`));
  box.replaceChildren(head('New message'), h('div', { class: 'card pad stack' }, h('p', { class: 'muted small' }, 'Who do you want to message?'), picker));
  picker.querySelector('input')?.focus();
}

// findDirect looks for the viewer's direct conversation with a user among
// the most recent ones: the API starts one with the first message only.
async function findDirect(userId: string): Promise<string | null> {
  let after: string | null = null;
  for (let i = 0; i < 5; i++) {
    const d: { conversations: Connection<ConvSummary> } = await q(`query($after: String) { conversations(first: 100, after: $after) { edges { cursor node { id isGroup peer { id } } } pageInfo { hasNextPage endCursor } } }`, { after });
    const hit = d.conversations.edges.find((e) => !e.node.isGroup && e.node.peer?.id === userId);
    if (hit) return hit.node.id;
    if (!d.conversations.pageInfo.hasNextPage) return null;
    after = d.conversations.pageInfo.endCursor;
  }
  return null;
}

function renderTo(box: HTMLElement, handle: string): void {
  box.replaceChildren(loading());
  void (async () => {
    let u: User | null;
    let existing: string | null = null;
    try {
      u = (await q<{ user: User | null }>(PROFILE, { h: handle })).user;
      if (u) existing = await findDirect(u.id);
    } catch (err) {
      box.replaceChildren(errorState(err, () => renderTo(box, handle), 'this conversation'));
      return;
    }
    if (!u) {
      box.replaceChildren(head('New message'), empty(`No one is called @${handle}`));
      return;
    }
    if (existing) {
      history.replaceState(null, '', `#/messages/${encodeURIComponent(existing)}`);
      return renderConversation(box, existing);
    }
    const to = u;
    const chat = h('ul', { class: 'chat', 'data-testid': 'chat-messages' });
    box.replaceChildren(
      head(to.displayName, `@${to.handle}`),
      h('div', { class: 'card chat-card' }, empty(`Start a conversation with ${to.displayName}`, 'Your first message starts it.'), chat, composer(async (text) => {
        const m = (await q<{ sendDirectMessage: ConvMessage }>(`mutation($to: ID!, $t: String!) { sendDirectMessage(to: $to, text: $t) { ${CONV_MESSAGE} } }`, { to: to.id, t: text })).sendDirectMessage;
        location.hash = `#/messages/${encodeURIComponent(m.conversationId)}`;
      })),
    );
    box.querySelector<HTMLTextAreaElement>('textarea')?.focus();
  })();
}

// composer is the box to write a message in: Enter sends, Shift+Enter
// starts a new line. A refused message stays in the box, the reason
// under it.
function composer(send: (text: string) => Promise<void>): HTMLElement {
  const text = h('textarea', { class: 'input chat-composer-input', rows: '1', maxlength: '5000', placeholder: 'Write a message…', 'aria-label': 'Message', 'data-testid': 'composer' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'composer-send' }, 'Send');
  const problem = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'composer-error', hidden: true });
  const form = h('form', { class: 'chat-composer' }, h('div', { class: 'chat-composer-row' }, text, submit), problem);
  text.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  text.addEventListener('input', () => (problem.hidden = true));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = text.value.trim();
    if (!t || submit.disabled) return;
    problem.hidden = true;
    void act(submit, async () => {
      try {
        await send(t);
        text.value = '';
      } catch (err) {
        // Said here, by the message it is about: the server's reason for
        // a refusal (who the recipient accepts messages from) included.
        const { code, text: words } = friendly(err);
        problem.textContent = err instanceof ApiError && code === 'FORBIDDEN' ? `Not sent: ${err.message}.` : `Not sent. ${words}`;
        problem.dataset.code = code;
        problem.hidden = false;
      }
      text.focus();
    });
  });
  return form;
}

// ---- a conversation ----

function renderConversation(box: HTMLElement, id: string): void {
  const root = h('div', { class: 'conversation', 'data-testid': 'conversation', 'data-id': id }, loading('Loading conversation…'));
  box.replaceChildren(root);
  let conv: ConvFull;
  const msgs = new Map<string, ConvMessage>();
  const chat = h('ul', { class: 'chat', 'data-testid': 'chat-messages', 'aria-live': 'polite' });
  const older = btn('Load older messages', 'ghost', { class: 'btn-block btn-sm', 'data-testid': 'chat-older', hidden: true });
  const headBox = h('div', {});
  const panel = h('div', { class: 'card pad members-panel', 'data-testid': 'members-panel', hidden: true });
  let olderCursor: string | null = null;
  const me = () => session.viewer?.id ?? '';
  const isAdmin = () => conv.admins.some((a) => a.id === me());

  const atBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  const toBottom = () => window.scrollTo(0, document.body.scrollHeight);

  // seen is the read receipt under the viewer's newest message: who of
  // the others has read up to it.
  const renderSeen = () => {
    chat.querySelector('[data-testid="seen"]')?.remove();
    const mine = [...msgs.values()].filter((m) => m.author?.id === me() && !m.deleted).sort((a, b) => b.seq - a.seq)[0];
    if (!mine) return;
    const readers = conv.readPositions.filter((p) => p.member.id !== me() && p.seq >= mine.seq).map((p) => conv.members.find((u) => u.id === p.member.id)?.displayName ?? 'someone');
    if (readers.length === 0) return;
    const li = chat.querySelector(`[data-id="${CSS.escape(mine.id)}"]`);
    const words = conv.isGroup ? (readers.length === conv.memberCount - 1 ? 'Seen by everyone' : `Seen by ${readers.join(', ')}`) : 'Seen';
    li?.after(h('li', { class: 'seen', 'data-testid': 'seen' }, words));
  };

  const bubble = (m: ConvMessage): HTMLLIElement => {
    const own = m.author?.id === me();
    const li = h('li', { class: `bubble-row${own ? ' mine' : ''}`, 'data-testid': 'chat-message', 'data-id': m.id, 'data-seq': String(m.seq) });
    const body = m.deleted ? h('p', { class: 'bubble-text deleted', 'data-testid': 'chat-text' }, 'message deleted') : h('p', { class: 'bubble-text', 'data-testid': 'chat-text' }, m.text);
    const meta = h('span', { class: 'bubble-meta' }, timeEl(m.createdAt), m.editedAt && !m.deleted ? h('span', { 'data-testid': 'chat-edited' }, ' · edited') : null);
    const tools = h('span', { class: 'bubble-tools' });
    if (own && !m.deleted) {
      const edit = btn('', 'ghost', { class: 'btn-icon btn-sm', 'aria-label': 'Edit message', title: 'Edit', 'data-testid': 'chat-edit' }, icon('edit'));
      const del = btn('', 'ghost', { class: 'btn-icon btn-sm', 'aria-label': 'Delete message', title: 'Delete', 'data-testid': 'chat-delete' }, icon('trash'));
      edit.addEventListener('click', () => editInPlace(li, m));
      del.addEventListener('click', () =>
        void act(del, async () => {
          const ok = await confirmDialog({ title: 'Delete this message?', body: 'Everyone in the conversation will see "message deleted" in its place.', confirm: 'Delete', danger: true });
          if (ok === null) return;
          await q('mutation($id: ID!) { deleteConversationMessage(id: $id) }', { id: m.id });
          put({ ...m, deleted: true, text: '' });
        }),
      );
      tools.append(edit, del);
    }
    li.append(
      !own && conv.isGroup && m.author ? avatar(m.author, 'sm') : '',
      h('div', { class: 'bubble' }, !own && conv.isGroup ? h('span', { class: 'bubble-author' }, m.author?.displayName ?? 'Deleted account') : '', body, h('span', { class: 'bubble-foot' }, meta, tools)),
    );
    return li;
  };

  const editInPlace = (li: HTMLLIElement, m: ConvMessage) => {
    const input = h('textarea', { class: 'input', rows: '2', maxlength: '5000', 'aria-label': 'Edit message', 'data-testid': 'chat-edit-input' });
    input.value = m.text;
    const save = btn('Save', 'primary', { class: 'btn-sm', 'data-testid': 'chat-edit-save' });
    const cancel = btn('Cancel', 'ghost', { class: 'btn-sm', 'data-testid': 'chat-edit-cancel' });
    const box = h('div', { class: 'bubble bubble-editing' }, input, h('div', { class: 'row row-end' }, cancel, save));
    li.replaceChildren(box);
    input.focus();
    const restore = () => put(msgs.get(m.id) ?? m);
    cancel.addEventListener('click', restore);
    const doSave = () =>
      void act(save, async () => {
        const t = input.value.trim();
        if (!t) return;
        put((await q<{ editConversationMessage: ConvMessage }>(`mutation($id: ID!, $t: String!) { editConversationMessage(id: $id, text: $t) { ${CONV_MESSAGE} } }`, { id: m.id, t })).editConversationMessage);
      });
    save.addEventListener('click', doSave);
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') restore();
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        doSave();
      }
    });
  };

  // put shows m where its seq places it, replacing the shown version.
  const put = (m: ConvMessage) => {
    msgs.set(m.id, m);
    const li = bubble(m);
    const cur = chat.querySelector(`[data-testid="chat-message"][data-id="${CSS.escape(m.id)}"]`);
    if (cur) cur.replaceWith(li);
    else {
      const next = [...chat.querySelectorAll<HTMLElement>('[data-testid="chat-message"]')].find((e) => Number(e.dataset.seq) > m.seq);
      if (next) chat.insertBefore(li, next);
      else chat.append(li);
    }
    renderSeen();
  };

  // markRead marks the conversation read up to the message upTo (null:
  // the newest). A burst of live messages makes one request at a time,
  // for the newest asked meanwhile, not one each: each would take a
  // round trip and tell every member's subscription.
  let reading = false;
  let readNext: { upTo: string | null } | null = null;
  const markRead = (upTo: string | null) => {
    readNext = { upTo: readNext?.upTo === null ? null : upTo };
    if (reading) return;
    reading = true;
    void act(null, async () => {
      try {
        while (readNext) {
          const next: string | null = readNext.upTo;
          readNext = null;
          await q('mutation($id: ID!, $upTo: ID) { markConversationRead(id: $id, upTo: $upTo) { id } }', { id, upTo: next });
        }
        await refreshBadge();
      } finally {
        reading = false;
      }
    });
  };

  const renderHead = () => {
    const sub = conv.isGroup ? plural(conv.memberCount, 'member') : conv.peer ? h('a', { href: `#/u/${conv.peer.handle}` }, `@${conv.peer.handle}`) : null;
    const actions: Node[] = [];
    if (conv.isGroup) {
      const toggle = btn(panel.hidden ? 'Members' : 'Hide members', 'secondary', { class: 'btn-sm', 'data-testid': 'members-toggle', 'aria-expanded': String(!panel.hidden) });
      toggle.addEventListener('click', () => {
        panel.hidden = !panel.hidden;
        renderHead();
      });
      actions.push(toggle);
    }
    headBox.replaceChildren(head(title(conv), sub, ...actions));
    if (conv.isGroup) renderPanel();
  };

  const renderPanel = () => {
    const admin = isAdmin();
    const rows = conv.members.map((u) => {
      const trailing: Node[] = [];
      if (conv.admins.some((a) => a.id === u.id)) trailing.push(h('span', { class: 'pill' }, 'Admin'));
      if (admin && u.id !== me()) {
        const rm = btn('Remove', 'secondary', { class: 'btn-sm', 'data-testid': 'member-remove' });
        rm.addEventListener('click', () =>
          void act(rm, async () => {
            const ok = await confirmDialog({ title: `Remove ${u.displayName}?`, body: 'They leave the group and no longer see its messages.', confirm: 'Remove', danger: true });
            if (ok === null) return;
            setConv((await q<{ removeMember: ConvFull }>(`mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { ${CONV_FULL} } }`, { c: id, u: u.id })).removeMember);
          }),
        );
        trailing.push(rm);
      }
      return h('li', { class: 'user-row', 'data-testid': 'member', 'data-id': u.id }, avatar(u, 'sm'), h('div', { class: 'user-row-body' }, h('a', { class: 'user-row-name', href: `#/u/${u.handle}` }, u.id === me() ? `${u.displayName} (you)` : u.displayName), h('span', { class: 'handle' }, ` @${u.handle}`)), ...trailing);
    });
    const leave = btn('Leave group', 'danger', { class: 'btn-sm', 'data-testid': 'leave-group' });
    leave.addEventListener('click', () =>
      void act(leave, async () => {
        const ok = await confirmDialog({ title: `Leave ${conv.name ?? 'this group'}?`, body: "You won't see its messages any more unless someone adds you again.", confirm: 'Leave', danger: true });
        if (ok === null) return;
        await q('mutation($c: ID!) { leaveConversation(conversationId: $c) }', { c: id });
        showNotice(`You left ${conv.name ?? 'the group'}.`);
        location.hash = '#/messages';
      }),
    );
    panel.replaceChildren(
      h('h2', { class: 'section-title' }, `Members (${conv.memberCount})`),
      h('ul', { class: 'list', 'data-testid': 'members' }, ...rows),
      admin
        ? h(
            'div',
            { class: 'stack' },
            h('span', { class: 'field-label' }, 'Add people'),
            userPicker(
              (u) =>
                void act(null, async () => {
                  setConv((await q<{ addMembers: ConvFull }>(`mutation($c: ID!, $u: [ID!]!) { addMembers(conversationId: $c, userIds: $u) { ${CONV_FULL} } }`, { c: id, u: [u.id] })).addMembers);
                  showNotice(`${u.displayName} was added.`);
                }),
              (u) => conv.members.some((m) => m.id === u.id),
              'Add someone by name or handle',
            ),
          )
        : '',
      h('div', { class: 'row row-end' }, leave),
    );
  };

  const setConv = (c: ConvFull) => {
    conv = { ...conv, ...c };
    renderHead();
    renderSeen();
  };

  // While older messages load, a live message does not scroll to the
  // bottom: the reader asked for the top.
  let loadingOlder = false;
  const loadOlder = async () => {
    loadingOlder = true;
    try {
      const d = await q<{ conversation: { messages: Connection<ConvMessage> } }>(CONVERSATION_OLDER, { id, after: olderCursor });
      const keep = document.body.scrollHeight - window.scrollY;
      for (const e of d.conversation.messages.edges) put(e.node);
      olderCursor = d.conversation.messages.pageInfo.endCursor;
      older.hidden = !d.conversation.messages.pageInfo.hasNextPage;
      // The messages read stay where they were on the screen.
      window.scrollTo(0, document.body.scrollHeight - keep);
    } finally {
      loadingOlder = false;
    }
  };
  older.addEventListener('click', () => void act(older, loadOlder));

  // oldestSeq is the seq of the oldest message shown (0: none).
  const oldestSeq = () => Number(chat.querySelector<HTMLElement>('[data-testid="chat-message"]')?.dataset.seq ?? 0);

  // load reads the conversation and its newest page. Read again (events
  // were missed), it keeps what is shown: the newest page is merged in
  // (edits and deletions replace their messages), and older pages the
  // reader loaded stay, with the cursor to the ones before them, since a
  // message keeps its seq for good.
  let loaded = false;
  let send: HTMLElement | null = null;
  const load = async () => {
    if (!loaded) root.replaceChildren(loading('Loading conversation…'));
    let d: { conversation: ConvFull & { messages: Connection<ConvMessage> } };
    try {
      d = await q(CONVERSATION, { id, after: null });
    } catch (err) {
      if (!loaded) root.replaceChildren(errorState(err, () => void load(), 'this conversation'));
      else showError(err);
      return;
    }
    conv = d.conversation;
    document.title = `${title(conv)} · Herald`;
    const page = d.conversation.messages;
    // A gap between the page read now and what is shown (more than a
    // page came since): start again from the newest page.
    const gap = loaded && page.pageInfo.hasNextPage && page.edges.length > 0 && page.edges[page.edges.length - 1].node.seq > Math.max(0, ...[...msgs.values()].map((m) => m.seq)) + 1;
    if (!loaded || gap) {
      msgs.clear();
      chat.replaceChildren();
      olderCursor = page.pageInfo.endCursor;
      older.hidden = !page.pageInfo.hasNextPage;
    }
    if (!send) {
      send = composer(async (text) => {
        const m = (await q<{ sendGroupMessage: ConvMessage }>(`mutation($c: ID!, $t: String!) { sendGroupMessage(conversationId: $c, text: $t) { ${CONV_MESSAGE} } }`, { c: id, t: text })).sendGroupMessage;
        put(m);
        toBottom();
      });
    }
    if (!loaded) root.replaceChildren(headBox, panel, h('div', { class: 'card chat-card' }, older, chat, send));
    renderHead();
    if (page.edges.length > 0) chat.querySelector('.chat-empty')?.remove();
    for (const e of page.edges) put(e.node);
    if (msgs.size === 0 && !chat.querySelector('.chat-empty')) chat.append(h('li', { class: 'muted small chat-empty' }, 'No messages yet: say hello.'));
    if (!loaded) {
      toBottom();
      send.querySelector('textarea')?.focus();
    }
    loaded = true;
    if (conv.unreadCount > 0) markRead(null);
  };

  let unseen = false;
  const onVisible = () => {
    if (!root.isConnected) return document.removeEventListener('visibilitychange', onVisible);
    if (document.visibilityState !== 'visible' || !unseen) return;
    unseen = false;
    markRead(null);
  };
  document.addEventListener('visibilitychange', onVisible);

  shown = {
    root,
    reload: () => void load(),
    event: (ev) => {
      if (ev.conversationId !== id || !conv) return;
      switch (ev.type) {
        case 'MESSAGE':
          if (ev.edge) {
            // A message older than those shown, while older ones are left
            // to load, is one of those (its event came late): shown now it
            // would sit above a gap. "Load older messages" brings it.
            if (!older.hidden && ev.edge.node.seq < oldestSeq()) break;
            const stay = atBottom() && !loadingOlder;
            chat.querySelector('.chat-empty')?.remove();
            put(ev.edge.node);
            if (stay) toBottom();
            // Read as it arrives when someone is looking; else once the
            // page is looked at again.
            if (ev.edge.node.author?.id !== me()) {
              if (document.visibilityState === 'visible') markRead(ev.edge.node.id);
              else unseen = true;
            }
          }
          break;
        case 'EDITED':
          if (ev.message && msgs.has(ev.message.id)) put(ev.message);
          break;
        case 'DELETED': {
          const m = ev.deletedMessageId ? msgs.get(ev.deletedMessageId) : undefined;
          if (m) put({ ...m, deleted: true, text: '' });
          break;
        }
        case 'READ':
          if (ev.member && ev.readSeq !== null) {
            const p = conv.readPositions.find((r) => r.member.id === ev.member!.id);
            if (p) p.seq = Math.max(p.seq, ev.readSeq);
            else conv.readPositions.push({ member: { id: ev.member.id }, seq: ev.readSeq });
            renderSeen();
          }
          break;
        case 'MEMBER_ADDED':
        case 'MEMBER_REMOVED':
          if (!ev.conversation) {
            // The viewer left or was removed: the group is no longer theirs.
            if (ev.member?.id === me()) {
              showNotice(`You are no longer in ${conv.name ?? 'this group'}.`);
              location.hash = '#/messages';
            }
            break;
          }
          setConv(ev.conversation);
          break;
        default:
          void load();
      }
    },
  };
  void load();
}

// ---- a new group ----

function renderNewGroup(box: HTMLElement): void {
  const picked: UserRef[] = [];
  const name = h('input', { class: 'input', maxlength: '100', required: true, placeholder: 'Weekend plans', 'data-testid': 'group-name' });
  const chips = h('ul', { class: 'chips', 'data-testid': 'group-members' });
  const create = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'group-create' }, 'Create group');
  const renderChips = () => {
    chips.replaceChildren(
      ...picked.map((u, i) => {
        const x = h('button', { type: 'button', class: 'chip-x', 'aria-label': `Remove ${u.displayName}` }, '×');
        x.addEventListener('click', () => {
          picked.splice(i, 1);
          renderChips();
        });
        return h('li', { class: 'chip', 'data-testid': 'group-member', 'data-handle': u.handle }, avatar(u, 'sm'), u.displayName, x);
      }),
    );
    chips.hidden = picked.length === 0;
  };
  const picker = userPicker(
    (u) => {
      picked.push({ id: u.id, handle: u.handle, displayName: u.displayName, avatarUrl: u.avatarUrl });
      renderChips();
    },
    (u) => picked.some((p) => p.id === u.id),
    'Add people by name or handle',
  );
  const form = h(
    'form',
    { class: 'card pad stack', 'data-testid': 'group-form' },
    h('label', { class: 'field' }, h('span', { class: 'field-label' }, 'Group name'), name),
    h('div', { class: 'field' }, h('span', { class: 'field-label' }, 'Members'), chips, picker),
    h('div', { class: 'row' }, create),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!name.value.trim()) return name.focus();
    void act(create, async () => {
      const d = await q<{ createGroup: { id: string } }>(`mutation($n: String!, $m: [ID!]!) { createGroup(name: $n, memberIds: $m) { id members { ${USER_REF} } } }`, { n: name.value.trim(), m: picked.map((u) => u.id) });
      location.hash = `#/messages/${encodeURIComponent(d.createGroup.id)}`;
    });
  });
  renderChips();
  box.replaceChildren(head('New group'), form);
  name.focus();
}
