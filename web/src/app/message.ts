// A message as a card: author, relative time, text with its mentions
// linked, and its actions: reply, repost, like, the thread, and for one's
// own messages edit and delete.
import { h } from './dom';
import { MESSAGE, msgMutation } from './queries';
import { act, bus, messageChanged, messageDeleted, q, session, showNotice } from './session';
import { icon } from './icons';
import { timeEl } from './time';
import type { Message } from './types';
import { avatar, btn, confirmDialog } from './ui';

export interface CardOptions {
  // The handle of the user whose repost brought the message here.
  repostedBy?: string;
  // The message the page is about (a thread's focus): larger text.
  focus?: boolean;
}

// linkify puts the text in p, each @handle the message mentions a link to
// its profile.
function linkify(p: HTMLElement, m: Message): void {
  const known = new Set(m.mentions.map((u) => u.handle.toLowerCase()));
  const parts = m.text.split(/(@[A-Za-z0-9_]{3,30})/);
  for (const [i, part] of parts.entries()) {
    const handle = part.slice(1).toLowerCase();
    if (i % 2 === 1 && known.has(handle)) p.append(h('a', { class: 'mention', href: `#/u/${handle}`, 'data-testid': 'mention' }, part));
    else if (part) p.append(part);
  }
}

function countButton(name: string, n: number, label: string, testid: string, pressed?: boolean): HTMLButtonElement {
  return h(
    'button',
    { type: 'button', class: 'action', 'data-testid': testid, 'aria-label': label, title: label, 'aria-pressed': pressed === undefined ? undefined : String(pressed) },
    icon(name, name === 'heart' && pressed),
    h('span', { class: 'action-count', 'data-testid': `${testid}-count` }, n > 0 ? String(n) : ''),
  );
}

export function messageCard(m: Message, testid: string, o: CardOptions = {}): HTMLElement {
  const own = m.author.id === session.viewer?.id;
  const card = h('article', {
    class: `msg${o.focus ? ' msg-focus' : ''}`,
    'data-testid': testid,
    'data-id': m.id,
    'data-reposted-by': o.repostedBy,
    'data-focus': o.focus ? 'yes' : undefined,
  });
  const text = h('p', { class: 'msg-text', 'data-testid': 'message-text' });
  linkify(text, m);

  const reply = countButton('reply', m.replyCount, m.replyCount ? `Reply (${m.replyCount} so far)` : 'Reply', 'reply');
  // The conversation, once there is one.
  const thread = m.replyCount
    ? h('a', { class: 'action action-link', href: `#/m/${encodeURIComponent(m.id)}`, 'data-testid': 'show-replies', title: 'Open the conversation' }, `${m.replyCount} ${m.replyCount === 1 ? 'reply' : 'replies'}`)
    : null;
  const repost = countButton('repost', m.repostCount, m.viewerHasReposted ? 'Undo repost' : 'Repost', 'repost', m.viewerHasReposted);
  const like = countButton('heart', m.likeCount, m.viewerHasLiked ? 'Unlike' : 'Like', 'like', m.viewerHasLiked);
  const actions = h('div', { class: 'msg-actions' }, reply, repost, like, thread);

  like.addEventListener('click', () =>
    void act(like, async () => {
      const field = m.viewerHasLiked ? 'unlike' : 'like';
      const d = await q<Record<string, Message>>(msgMutation(field), { id: m.id });
      messageChanged(d[field]);
    }),
  );
  repost.addEventListener('click', () =>
    void act(repost, async () => {
      const field = m.viewerHasReposted ? 'unrepost' : 'repost';
      const d = await q<Record<string, Message>>(msgMutation(field), { id: m.id });
      messageChanged(d[field]);
      bus.dispatchEvent(new Event('reposted'));
    }),
  );
  reply.addEventListener('click', () => openReply(card, m));

  if (own) {
    const edit = h('button', { type: 'button', class: 'action action-edit', 'data-testid': 'edit', 'aria-label': 'Edit message', title: 'Edit' }, icon('edit'));
    const del = h('button', { type: 'button', class: 'action action-delete', 'data-testid': 'delete', 'aria-label': 'Delete message', title: 'Delete' }, icon('trash'));
    edit.addEventListener('click', () => startEdit(card, m));
    del.addEventListener('click', () =>
      void act(del, async () => {
        const ok = await confirmDialog({ title: 'Delete this message?', body: 'It disappears from every timeline at once. This cannot be undone.', confirm: 'Delete', danger: true });
        if (ok === null) return;
        await q('mutation($id: ID!) { deleteMessage(id: $id) }', { id: m.id });
        messageDeleted(m.id);
        showNotice('Message deleted.');
      }),
    );
    actions.append(h('span', { class: 'spacer' }), edit, del);
  }

  if (o.repostedBy) card.append(h('p', { class: 'msg-context msg-reposted', 'data-testid': 'reposted-by' }, icon('repost'), ` ${o.repostedBy === session.viewer?.handle ? 'You' : '@' + o.repostedBy} reposted`));
  card.append(
    h(
      'div',
      { class: 'msg-grid' },
      h('a', { href: `#/u/${m.author.handle}`, class: 'msg-avatar', tabindex: '-1' }, avatar(m.author, 'md')),
      h(
        'div',
        { class: 'msg-body' },
        h(
          'p',
          { class: 'msg-head' },
          h('a', { class: 'msg-name', href: `#/u/${m.author.handle}`, 'data-testid': 'author-name' }, m.author.displayName),
          h('span', { class: 'handle' }, `@${m.author.handle}`),
          h('span', { class: 'dot', 'aria-hidden': 'true' }, '·'),
          h('a', { class: 'msg-time', href: `#/m/${encodeURIComponent(m.id)}` }, timeEl(m.createdAt)),
          m.editedAt ? h('span', { class: 'edited', 'data-testid': 'edited', title: `Edited ${new Date(m.editedAt).toLocaleString()}` }, 'edited') : null,
          h('span', { class: 'unread-dot', 'data-testid': 'unread-marker', title: 'New since you last read', 'aria-label': 'unread' }),
        ),
        m.replyTo
          ? h('p', { class: 'msg-context', 'data-testid': 'reply-to' }, 'Replying to ', h('a', { href: `#/m/${encodeURIComponent(m.replyTo.id)}` }, `@${m.replyTo.author.handle}`))
          : null,
        text,
        actions,
      ),
    ),
  );
  return card;
}

function openReply(card: HTMLElement, m: Message): void {
  const open = card.querySelector<HTMLFormElement>(':scope form.reply-form');
  if (open) {
    open.querySelector('textarea')?.focus();
    return;
  }
  const area = h('textarea', { class: 'input', rows: '2', maxlength: '5000', required: true, placeholder: `Reply to @${m.author.handle}…`, 'data-testid': 'reply-text', 'aria-label': 'Your reply' });
  const send = h('button', { type: 'submit', class: 'btn btn-primary btn-sm', 'data-testid': 'reply-send' }, 'Reply');
  const cancel = btn('Cancel', 'ghost', { 'data-testid': 'cancel-reply', class: 'btn-sm' });
  const form = h(
    'form',
    { class: 'reply-form' },
    h('p', { class: 'msg-context', 'data-testid': 'replying' }, `Replying to @${m.author.handle}`),
    area,
    h('div', { class: 'row row-end' }, cancel, send),
  );
  cancel.addEventListener('click', () => form.remove());
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void act(send, async () => {
      await q<{ postMessage: Message }>(`mutation($input: PostMessageInput!) { postMessage(input: $input) { ...Msg } } ${MESSAGE}`, { input: { text: area.value, replyTo: m.id } });
      form.remove();
      messageChanged({ ...m, replyCount: m.replyCount + 1 });
      showNotice('Reply posted.');
      bus.dispatchEvent(new Event('posted'));
    });
  });
  card.append(form);
  area.focus();
}

function startEdit(card: HTMLElement, m: Message): void {
  const area = h('textarea', { class: 'input', 'aria-label': 'New text', rows: '3', maxlength: '5000', required: true, 'data-testid': 'edit-text' });
  area.value = m.text;
  const save = h('button', { type: 'submit', class: 'btn btn-primary btn-sm', 'data-testid': 'save' }, 'Save');
  const cancel = btn('Cancel', 'ghost', { 'data-testid': 'cancel', class: 'btn-sm' });
  const form = h('form', { class: 'edit-form' }, area, h('div', { class: 'row row-end' }, cancel, save));
  const text = card.querySelector<HTMLElement>('.msg-text');
  const actions = card.querySelector<HTMLElement>('.msg-actions');
  if (!text || !actions) return;
  text.hidden = true;
  actions.hidden = true;
  text.after(form);
  cancel.addEventListener('click', () => {
    form.remove();
    text.hidden = false;
    actions.hidden = false;
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void act(save, async () => {
      const d = await q<{ editMessage: Message }>(`mutation($id: ID!, $text: String!) { editMessage(id: $id, text: $text) { ...Msg } } ${MESSAGE}`, { id: m.id, text: area.value });
      messageChanged(d.editMessage);
    });
  });
  area.focus();
}

// Every card of a changed message shows it as it is now; a deleted one
// goes.
bus.addEventListener('message', (ev) => {
  const m = (ev as CustomEvent<Message>).detail;
  for (const card of document.querySelectorAll<HTMLElement>(`article.msg[data-id="${CSS.escape(m.id)}"]`)) {
    const fresh = messageCard(m, card.dataset.testid ?? 'message', { repostedBy: card.dataset.repostedBy, focus: card.dataset.focus === 'yes' });
    fresh.classList.toggle('unread', card.classList.contains('unread'));
    card.replaceWith(fresh);
  }
});

bus.addEventListener('deleted', (ev) => {
  const id = (ev as CustomEvent<string>).detail;
  for (const card of document.querySelectorAll(`article.msg[data-id="${CSS.escape(id)}"]`)) card.remove();
});
