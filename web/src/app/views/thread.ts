// A conversation: the post it started from, the message, and its replies.
import { h } from '../dom';
import { MESSAGE } from '../queries';
import { icon } from '../icons';
import { q } from '../session';
import type { Message } from '../types';
import { messageCard } from '../message';
import { empty, loadInto } from '../ui';

interface ThreadData {
  node: (Message & { root: Message | null; replies: { totalCount: number; edges: { node: Message }[] } }) | null;
}

export function renderThread(box: HTMLElement, id: string): void {
  const body = h('div', { class: 'thread' });
  const back = h('button', { type: 'button', class: 'btn btn-ghost btn-icon', 'data-testid': 'back', 'aria-label': 'Back' }, icon('back'));
  box.replaceChildren(h('div', { class: 'view-head view-head-start' }, back, h('h1', {}, 'Conversation')), body);
  // Back where the reader came from, or home when the page opened here.
  back.addEventListener('click', () => (history.length > 1 ? history.back() : (location.hash = '#/home')));
  void loadInto(
    body,
    () =>
      q<ThreadData>(
        `query($id: ID!) { node(id: $id) { ... on Message { ...Msg root { ...Msg } replies(first: 50) { totalCount edges { node { ...Msg } } } } } } ${MESSAGE}`,
        { id },
      ),
    (d) => {
      const m = d.node;
      if (!m) return empty('This message is gone', 'It was deleted, or you cannot see it.');
      // The post the thread started from, and the message, in one card.
      const top = h('div', { class: 'feed' });
      if (m.root && m.root.id !== m.id) {
        top.append(messageCard(m.root, 'thread-root'));
        if (m.root.id !== m.replyTo?.id) top.append(h('div', { class: 'thread-gap', 'aria-hidden': 'true' }, '⋮'));
      }
      top.append(messageCard(m, 'thread-focus', { focus: true }));
      const out: Node[] = [top];
      const replies = h('div', { class: 'feed replies', 'data-testid': 'replies' }, ...m.replies.edges.map((e) => messageCard(e.node, 'reply-item')));
      out.push(h('h2', { class: 'section-title' }, m.replies.totalCount ? `${m.replies.totalCount} ${m.replies.totalCount === 1 ? 'reply' : 'replies'}` : 'No replies yet'), replies);
      return out;
    },
    'this conversation',
  );
}
