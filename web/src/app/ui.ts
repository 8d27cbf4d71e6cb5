// Components shared by the views: buttons, avatars, list states, user
// rows with follow buttons, and the confirmation dialog.
import { compact, h, must, plural } from './dom';
import { friendly } from './errors';
import { userMutation } from './queries';
import { act, extras, q, session } from './session';
import type { User, UserExtras, UserRef } from './types';

type Variant = 'primary' | 'secondary' | 'danger' | 'ghost';

export function btn(label: string, variant: Variant, attrs: Record<string, string | boolean | undefined> = {}, ...extra: (Node | string)[]): HTMLButtonElement {
  const cls = `btn btn-${variant}${attrs.class ? ` ${attrs.class}` : ''}`;
  return h('button', { type: 'button', ...attrs, class: cls }, label, ...extra);
}

const hues = [210, 265, 330, 20, 150, 190, 45, 290];

function initials(u: UserRef): string {
  const words = (u.displayName || u.handle).trim().split(/\s+/).filter(Boolean);
  const s = words.length > 1 ? words[0][0] + words[1][0] : (words[0] ?? u.handle).slice(0, 2);
  return s.toUpperCase();
}

// avatar is the user's picture, or their initials on a color of their
// handle's when they have none (or it fails to load).
export function avatar(u: UserRef, size: 'sm' | 'md' | 'lg' = 'md'): HTMLElement {
  let sum = 0;
  for (const c of u.handle) sum = (sum * 31 + c.charCodeAt(0)) >>> 0;
  const box = h('span', { class: `avatar avatar-${size}`, 'aria-hidden': 'true', style: `--hue: ${hues[sum % hues.length]}` }, initials(u));
  if (u.avatarUrl) {
    const img = h('img', { src: u.avatarUrl, alt: '', referrerpolicy: 'no-referrer', loading: 'lazy', 'data-testid': 'avatar-img' });
    img.addEventListener('error', () => img.remove());
    box.append(img);
  }
  return box;
}

export function userLink(u: UserRef, cls = 'name-link'): HTMLAnchorElement {
  return h('a', { class: cls, href: `#/u/${u.handle}` }, u.displayName);
}

// ---- list states ----

export function loading(text = 'Loading…'): HTMLElement {
  return h('div', { class: 'state state-loading', 'data-testid': 'loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), text);
}

export function empty(title: string, body?: string, action?: Node): HTMLElement {
  return h('div', { class: 'state state-empty', 'data-testid': 'empty' }, h('p', { class: 'state-title' }, title), body ? h('p', { class: 'muted' }, body) : null, action ?? null);
}

export function errorState(err: unknown, retry?: () => void, what = 'this'): HTMLElement {
  const { code, text } = friendly(err);
  const again = retry ? btn('Try again', 'secondary', { 'data-testid': 'retry' }) : null;
  again?.addEventListener('click', retry!);
  return h(
    'div',
    { class: 'state state-error', 'data-testid': 'load-error', 'data-code': code, role: 'alert' },
    h('p', { class: 'state-title' }, `Couldn't load ${what}`),
    h('p', { class: 'muted' }, text),
    again,
  );
}

// loadInto shows a loading state in box, then what render makes of the
// loaded data, or an error state with a retry.
export async function loadInto<T>(box: HTMLElement, load: () => Promise<T>, render: (d: T) => Node | Node[], what?: string): Promise<void> {
  box.replaceChildren(loading());
  box.setAttribute('aria-busy', 'true');
  try {
    const d = await load();
    const out = render(d);
    box.replaceChildren(...(Array.isArray(out) ? out : [out]));
  } catch (err) {
    box.replaceChildren(errorState(err, () => void loadInto(box, load, render, what), what));
  } finally {
    box.removeAttribute('aria-busy');
  }
}

// ---- follow buttons and user rows ----

export interface Followable extends UserRef {
  viewerFollows: boolean;
  followerCount?: number;
}

// followButton follows and unfollows u, and shows "Requested" while a
// private account has not answered. onChange gets the user as changed.
export function followButton(u: Followable, x: UserExtras | undefined, onChange: (u: User, x: UserExtras | undefined) => void, testid = 'follow-toggle'): HTMLButtonElement {
  const requested = !u.viewerFollows && !!x?.viewerRequestedFollow;
  const label = u.viewerFollows ? 'Following' : requested ? 'Requested' : 'Follow';
  const b = btn(label, u.viewerFollows || requested ? 'secondary' : 'primary', {
    'data-testid': testid,
    'aria-pressed': String(u.viewerFollows || requested),
    title: u.viewerFollows ? `Unfollow @${u.handle}` : requested ? 'Waiting for approval — press to cancel the request' : `Follow @${u.handle}`,
    class: 'follow',
    hidden: u.id === session.viewer?.id || !!x?.viewerBlocks,
  });
  b.addEventListener('click', () =>
    void act(b, async () => {
      const op = u.viewerFollows || requested ? 'unfollow' : 'follow';
      const d = await q<Record<string, User>>(userMutation(op), { id: u.id });
      const nx = (await extras([u.id])).get(u.id);
      onChange(d[op], nx);
    }),
  );
  return b;
}

// userRow is a user in a list: avatar, name, handle, and a follow button.
export function userRow(u: Followable & { bio?: string | null }, testid = 'user-row', followTestid = 'row-follow', x?: UserExtras, trailing?: Node): HTMLLIElement {
  const li = h('li', { class: 'user-row', 'data-testid': testid, 'data-id': u.id });
  const render = (cur: Followable & { bio?: string | null }, cx?: UserExtras) => {
    li.replaceChildren(
      h('a', { class: 'user-row-link', href: `#/u/${cur.handle}` }, avatar(cur, 'md')),
      h(
        'div',
        { class: 'user-row-body' },
        h('a', { class: 'user-row-name', href: `#/u/${cur.handle}` }, cur.displayName),
        h('span', { class: 'handle' }, `@${cur.handle}`),
        cur.followerCount !== undefined ? h('span', { class: 'muted small', 'data-testid': 'row-followers' }, ` · ${plural(cur.followerCount, 'follower')}`) : null,
        cur.bio ? h('p', { class: 'user-row-bio' }, cur.bio) : null,
      ),
      trailing ?? followButton(cur, cx, (nu, nx) => render(nu, nx), followTestid),
    );
  };
  render(u, x);
  return li;
}

export function countLink(n: number, label: string, href: string, testid: string): HTMLAnchorElement {
  return h('a', { class: 'count', href, 'data-testid': testid }, h('strong', {}, compact(n)), ` ${label}`);
}

// ---- dialogs ----

const dialog = must<HTMLDialogElement>('dialog');

export interface ConfirmOptions {
  title: string;
  body: string;
  confirm: string;
  danger?: boolean;
  // password asks for the password, which the promise resolves to.
  password?: boolean;
}

// confirmDialog asks before an action with consequences; it resolves to
// null when cancelled, else to the password typed (or "").
export function confirmDialog(o: ConfirmOptions): Promise<string | null> {
  return new Promise((resolve) => {
    const pw = o.password
      ? h('input', { class: 'input', type: 'password', required: true, autocomplete: 'current-password', 'data-testid': 'dialog-password', 'aria-label': 'Password' })
      : null;
    const ok = h('button', { type: 'submit', class: `btn ${o.danger ? 'btn-danger' : 'btn-primary'}`, 'data-testid': 'dialog-confirm' }, o.confirm);
    const cancel = btn('Cancel', 'ghost', { 'data-testid': 'dialog-cancel' });
    const form = h(
      'form',
      { method: 'dialog', class: 'dialog-body' },
      h('h2', { class: 'dialog-title' }, o.title),
      h('p', { class: 'muted' }, o.body),
      pw ? h('label', { class: 'field' }, h('span', { class: 'field-label' }, 'Password'), pw) : null,
      h('div', { class: 'row row-end' }, cancel, ok),
    );
    let answer: string | null = null;
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      answer = pw ? pw.value : '';
      dialog.close();
    });
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => resolve(answer), { once: true });
    dialog.replaceChildren(form);
    dialog.showModal();
    (pw ?? ok).focus();
  });
}
