// A profile page: the header (picture, name, bio, website, counts, follow
// button and a menu to mute or block), then the user's posts, followers,
// following or likes.
import { h } from '../dom';
import { MESSAGE, PROFILE, PROFILE_MESSAGES, USER, userMutation } from '../queries';
import { act, bus, extras, q, session, showNotice } from '../session';
import { icon } from '../icons';
import { joined } from '../time';
import type { Connection, Message, User, UserExtras } from '../types';
import { messageCard } from '../message';
import { avatar, btn, confirmDialog, countLink, empty, errorState, followButton, loadInto, loading, userRow } from '../ui';

export type ProfileTab = 'posts' | 'followers' | 'following' | 'likes';

export function renderProfile(box: HTMLElement, handle: string, tab: ProfileTab): void {
  const head = h('div', { class: 'profile-head' }, loading('Loading profile…'));
  const body = h('div', { class: 'profile-body' });
  box.replaceChildren(head, body);
  void (async () => {
    let u: User | null;
    try {
      u = (await q<{ user: User | null }>(PROFILE, { h: handle })).user;
    } catch (err) {
      head.replaceChildren(errorState(err, () => renderProfile(box, handle, tab), 'this profile'));
      return;
    }
    if (!u) {
      head.replaceChildren(empty(`No one is called @${handle}`, 'The account may have been deleted, or the handle is mistyped.', h('a', { class: 'btn btn-secondary', href: '#/search' }, 'Search people')));
      head.dataset.testid = 'profile-missing';
      return;
    }
    const x = (await extras([u.id])).get(u.id);
    renderHead(head, u, x, tab, () => renderProfile(box, handle, tab));
    renderTab(body, u, x, tab);
  })();
}

function renderHead(head: HTMLElement, u: User, x: UserExtras | undefined, tab: ProfileTab, reload: () => void): void {
  const own = u.id === session.viewer?.id;
  const actions = h('div', { class: 'profile-actions' });
  if (own) actions.append(h('a', { class: 'btn btn-secondary', href: '#/settings', 'data-testid': 'edit-profile' }, 'Edit profile'));
  else if (x?.viewerBlocks) {
    const unblock = btn('Unblock', 'danger', { 'data-testid': 'unblock' });
    unblock.addEventListener('click', () =>
      void act(unblock, async () => {
        await q(userMutation('unblock'), { id: u.id });
        showNotice(`@${u.handle} is unblocked.`);
        reload();
      }),
    );
    actions.append(unblock);
  } else {
    actions.append(
      followButton(u, x, (nu, nx) => {
        if (!nu.viewerFollows) bus.dispatchEvent(new CustomEvent('userGone', { detail: nu.id }));
        else bus.dispatchEvent(new Event('userBack'));
        renderHead(head, nu, nx, tab, reload);
      }),
    );
  }
  // The server says whether u takes messages from the viewer when one is sent.
  if (!own && !x?.viewerBlocks) actions.append(h('a', { class: 'btn btn-secondary', href: `#/messages/to/${u.handle}`, 'data-testid': 'message-user' }, 'Message'));
  if (!own) actions.append(menu(u, x, reload));

  const base = `#/u/${u.handle}`;
  const website = u.websiteUrl ? h('a', { href: u.websiteUrl, rel: 'nofollow noopener noreferrer', target: '_blank', class: 'website', 'data-testid': 'found-website' }, u.websiteUrl.replace(/^https?:\/\//, '').replace(/\/$/, '')) : null;
  head.replaceChildren(
    h(
      'div',
      { class: 'card profile-card', 'data-testid': 'found-user' },
      h('div', { class: 'profile-top' }, avatar(u, 'lg'), actions),
      h('h1', { class: 'profile-name' }, h('span', { 'data-testid': 'found-name' }, u.displayName), x?.private ? h('span', { class: 'pill', title: 'Private account: followers are approved', 'data-testid': 'private-badge' }, icon('lock'), 'Private') : null),
      h('p', { class: 'handle' }, `@${u.handle}`, x?.viewerMutes ? h('span', { class: 'pill pill-muted', 'data-testid': 'muted-badge' }, 'Muted') : null),
      u.bio ? h('p', { class: 'bio', 'data-testid': 'found-bio' }, u.bio) : null,
      h('p', { class: 'muted small profile-meta' }, website, website ? h('span', { class: 'dot' }, '·') : null, joined(u.createdAt)),
      h(
        'p',
        { class: 'counts', 'data-testid': 'found-counts' },
        countLink(u.messageCount, u.messageCount === 1 ? 'post' : 'posts', base, 'count-posts'),
        countLink(u.followerCount, u.followerCount === 1 ? 'follower' : 'followers', `${base}/followers`, 'count-followers'),
        countLink(u.followingCount, 'following', `${base}/following`, 'count-following'),
      ),
      x?.viewerBlocks ? h('p', { class: 'banner banner-danger', 'data-testid': 'blocked-banner' }, `You blocked @${u.handle}. They can't follow you or see your posts.`) : null,
    ),
    h(
      'nav',
      { class: 'subtabs', 'aria-label': 'Profile sections' },
      ...(
        [
          ['posts', 'Posts', base],
          ['followers', 'Followers', `${base}/followers`],
          ['following', 'Following', `${base}/following`],
          ['likes', 'Likes', `${base}/likes`],
        ] as const
      ).map(([t, label, href]) => h('a', { class: 'subtab', href, 'aria-current': t === tab ? 'page' : undefined, 'data-testid': `subtab-${t}` }, label)),
    ),
  );
}

// menu is the "⋯" menu of another user's profile: mute and block, each
// asked for first.
function menu(u: User, x: UserExtras | undefined, reload: () => void): HTMLElement {
  const toggle = btn('', 'secondary', { 'aria-haspopup': 'menu', 'aria-expanded': 'false', 'aria-label': `More for @${u.handle}`, 'data-testid': 'profile-menu', class: 'btn-icon' });
  const mute = h('button', { type: 'button', role: 'menuitem', class: 'menu-item', 'data-testid': x?.viewerMutes ? 'menu-unmute' : 'menu-mute' }, x?.viewerMutes ? `Unmute @${u.handle}` : `Mute @${u.handle}`);
  const block = h('button', { type: 'button', role: 'menuitem', class: 'menu-item menu-danger', 'data-testid': x?.viewerBlocks ? 'menu-unblock' : 'menu-block' }, x?.viewerBlocks ? `Unblock @${u.handle}` : `Block @${u.handle}`);
  toggle.append(icon('more'));
  const list = h('div', { class: 'menu', role: 'menu', hidden: true }, mute, block);
  const wrap = h('div', { class: 'menu-wrap' }, toggle, list);
  const close = () => {
    list.hidden = true;
    toggle.setAttribute('aria-expanded', 'false');
  };
  list.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      close();
      toggle.focus();
    }
  });
  toggle.addEventListener('click', (ev) => {
    ev.stopPropagation();
    list.hidden = !list.hidden;
    toggle.setAttribute('aria-expanded', String(!list.hidden));
    if (!list.hidden) {
      document.addEventListener('click', close, { once: true });
      mute.focus();
    }
  });
  mute.addEventListener('click', () =>
    void act(toggle, async () => {
      close();
      const undo = !!x?.viewerMutes;
      if (!undo) {
        const ok = await confirmDialog({
          title: `Mute @${u.handle}?`,
          body: "Their posts and reposts leave your home timeline and their activity your notifications. They won't know, and you still follow them.",
          confirm: 'Mute',
        });
        if (ok === null) return;
      }
      await q(userMutation(undo ? 'unmute' : 'mute'), { id: u.id });
      bus.dispatchEvent(undo ? new Event('userBack') : new CustomEvent('userGone', { detail: u.id }));
      showNotice(undo ? `@${u.handle} is unmuted.` : `@${u.handle} is muted.`);
      reload();
    }),
  );
  block.addEventListener('click', () =>
    void act(toggle, async () => {
      close();
      const undo = !!x?.viewerBlocks;
      if (!undo) {
        const ok = await confirmDialog({
          title: `Block @${u.handle}?`,
          body: "You'll stop following each other, neither of you can follow the other, and they won't see your posts. Their posts leave your timeline.",
          confirm: 'Block',
          danger: true,
        });
        if (ok === null) return;
      }
      await q(userMutation(undo ? 'unblock' : 'block'), { id: u.id });
      if (!undo) bus.dispatchEvent(new CustomEvent('userGone', { detail: u.id }));
      bus.dispatchEvent(new Event('notificationsChanged'));
      showNotice(undo ? `@${u.handle} is unblocked.` : `@${u.handle} is blocked.`);
      reload();
    }),
  );
  return wrap;
}

function renderTab(body: HTMLElement, u: User, x: UserExtras | undefined, tab: ProfileTab): void {
  const own = u.id === session.viewer?.id;
  if (x?.viewerBlocks) {
    body.replaceChildren(empty('Blocked', `Unblock @${u.handle} to see their posts.`));
    return;
  }
  if (x?.private && !own && !u.viewerFollows) {
    body.replaceChildren(empty('These posts are protected', `Only people @${u.handle} approved can see their posts, likes and follows.`));
    return;
  }
  if (tab === 'followers' || tab === 'following') return renderUsers(body, u, tab);
  if (tab === 'likes') return renderLikes(body, u);
  renderPosts(body, u, own);
}

function renderPosts(body: HTMLElement, u: User, own: boolean): void {
  const list = h('div', { class: 'feed', 'data-testid': 'profile-messages' });
  const more = btn('Show older posts', 'secondary', { class: 'btn-block', hidden: true, 'data-testid': 'profile-more' });
  let after: string | null = null;
  type Page = { user: { messages: Connection<Message & { repostOf: Message | null }> } | null };
  const add = (d: Page) => {
    for (const { node } of d.user?.messages.edges ?? []) {
      // A repost shows as the message reposted; one whose message is gone
      // shows nothing.
      if (node.kind !== 'REPOST') list.append(messageCard(node, 'profile-message'));
      else if (node.repostOf) list.append(messageCard(node.repostOf, 'profile-message', { repostedBy: u.handle }));
    }
    after = d.user?.messages.pageInfo.endCursor ?? after;
    more.hidden = !d.user?.messages.pageInfo.hasNextPage;
  };
  const box = h('div', {});
  body.replaceChildren(box, list, more);
  void loadInto(
    box,
    () => q<Page>(PROFILE_MESSAGES, { h: u.handle, after: null }),
    (d) => {
      add(d);
      return list.children.length ? [] : [empty(own ? "You haven't posted yet" : 'No posts yet', own ? 'Your posts and reposts show here.' : `When @${u.handle} posts, it shows here.`, own ? h('a', { class: 'btn btn-primary', href: '#/home' }, 'Write a post') : undefined)];
    },
    'posts',
  );
  more.addEventListener('click', () => void act(more, async () => add(await q<Page>(PROFILE_MESSAGES, { h: u.handle, after }))));
}

function renderUsers(body: HTMLElement, u: User, which: 'followers' | 'following'): void {
  const list = h('ul', { class: 'list card', 'data-testid': `${which}-list` });
  const box = h('div', {});
  body.replaceChildren(box, list);
  list.hidden = true;
  void loadInto(
    box,
    () => q<{ user: Record<string, Connection<User>> | null }>(`query($h: String!) { user(handle: $h) { ${which}(first: 50) { totalCount edges { cursor node { ${USER} } } } } }`, { h: u.handle }),
    (d) => {
      const edges = d.user?.[which].edges ?? [];
      list.replaceChildren(...edges.map((e) => userRow(e.node, 'user-row', 'row-follow')));
      list.hidden = edges.length === 0;
      if (edges.length) return [];
      return empty(which === 'followers' ? 'No followers yet' : 'Not following anyone yet', which === 'followers' ? `When people follow @${u.handle}, they show here.` : `When @${u.handle} follows people, they show here.`);
    },
    which,
  );
}

function renderLikes(body: HTMLElement, u: User): void {
  const list = h('div', { class: 'feed', 'data-testid': 'likes-list' });
  const box = h('div', {});
  body.replaceChildren(box, list);
  void loadInto(
    box,
    () => q<{ user: { likes: { edges: { node: Message }[] } } | null }>(`query($h: String!) { user(handle: $h) { likes(first: 20) { edges { likedAt node { ...Msg } } } } } ${MESSAGE}`, { h: u.handle }),
    (d) => {
      const edges = d.user?.likes.edges ?? [];
      list.replaceChildren(...edges.map((e) => messageCard(e.node, 'liked-message')));
      return edges.length ? [] : empty('No likes yet', `Posts @${u.handle} likes show here.`);
    },
    'likes',
  );
}
