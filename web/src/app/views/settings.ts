// Settings: the profile editor, privacy and follow requests, blocked and
// muted accounts, password, export, sessions and account deletion.
import { ApiError } from '../api';
import { h } from '../dom';
import { USER, USER_REF, userMutation } from '../queries';
import { act, bus, clearError, q, session, showError, showNotice, type Viewer } from '../session';
import type { Connection, User } from '../types';
import { btn, confirmDialog, empty, loadInto, userRow } from '../ui';

export interface SettingsHooks {
  profileSaved(v: Viewer): void;
  signedOut(message?: string): void;
  logOutEverywhere(): void;
}

function section(title: string, testid: string, ...children: (Node | null)[]): HTMLElement {
  return h('section', { class: 'card settings-section', 'data-testid': testid }, h('h2', { class: 'section-title' }, title), ...children);
}

function field(label: string, input: HTMLElement, hint?: string): HTMLElement {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label, hint ? h('span', { class: 'muted' }, ` ${hint}`) : null), input);
}

export function renderSettings(box: HTMLElement, hooks: SettingsHooks): void {
  const v = session.viewer;
  if (!v) return;
  box.replaceChildren(
    h('div', { class: 'view-head' }, h('h1', {}, 'Settings')),
    profileSection(v, hooks),
    privacySection(),
    messagesSection(),
    listSection('Blocked accounts', 'blocked', 'unblock', 'Unblock', "You haven't blocked anyone.", 'blocked-list'),
    listSection('Muted accounts', 'muted', 'unmute', 'Unmute', "You haven't muted anyone.", 'muted-list'),
    passwordSection(),
    exportSection(v),
    sessionsSection(hooks),
    deleteSection(hooks),
  );
}

// profileProblem words a refused profile for the person editing it; null
// for errors the page handles as any other (a session that ended).
function profileProblem(err: unknown): string | null {
  if (!(err instanceof ApiError)) return 'Your profile could not be saved; try again.';
  switch (err.code) {
    case 'BAD_USER_INPUT':
      return `Please check your profile: the ${err.message}.`;
    case 'RATE_LIMITED':
      return "You're saving too often — wait a moment and try again.";
    case 'UNAUTHENTICATED':
      return null;
    default:
      return 'Your profile could not be saved; try again.';
  }
}

function profileSection(v: Viewer, hooks: SettingsHooks): HTMLElement {
  const name = h('input', { class: 'input', name: 'displayName', maxlength: '64', autocomplete: 'name', 'data-testid': 'profile-display-name' });
  const bio = h('textarea', { class: 'input', name: 'bio', rows: '3', maxlength: '300', 'data-testid': 'profile-bio' });
  const web = h('input', { class: 'input', name: 'websiteUrl', type: 'url', placeholder: 'https://…', 'data-testid': 'profile-website' });
  const pic = h('input', { class: 'input', name: 'avatarUrl', type: 'url', placeholder: 'https://…/picture.png', 'data-testid': 'profile-avatar' });
  const fill = (p: Viewer) => {
    name.value = p.displayName;
    bio.value = p.bio ?? '';
    web.value = p.websiteUrl ?? '';
    pic.value = p.avatarUrl ?? '';
  };
  fill(v);
  const problem = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'profile-error', hidden: true });
  const saved = h('span', { class: 'saved', 'data-testid': 'profile-saved', hidden: true }, '✓ Saved');
  const save = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'profile-save' }, 'Save profile');
  const form = h(
    'form',
    { class: 'stack', 'data-testid': 'profile-form', novalidate: true },
    field('Name', name),
    field('Bio', bio, '(up to 300 characters)'),
    field('Website', web),
    field('Picture URL', pic),
    problem,
    h('div', { class: 'row' }, save, saved, h('a', { href: `#/u/${v.handle}`, class: 'small' }, 'View your profile')),
  );
  form.addEventListener('input', () => (saved.hidden = true));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = { displayName: name.value.trim(), bio: bio.value.trim(), websiteUrl: web.value.trim(), avatarUrl: pic.value.trim() };
    problem.hidden = true;
    saved.hidden = true;
    void act(save, async () => {
      let p: Viewer;
      try {
        p = (await q<{ updateProfile: Viewer }>(`mutation($input: UpdateProfileInput!) { updateProfile(input: $input) { ${USER_REF} bio websiteUrl } }`, { input })).updateProfile;
      } catch (err) {
        const text = profileProblem(err);
        if (!text) throw err;
        problem.textContent = text;
        problem.hidden = false;
        return;
      }
      fill(p);
      saved.hidden = false;
      hooks.profileSaved(p);
    });
  });
  return section('Profile', 'settings-profile', h('p', { class: 'muted small' }, 'How others see you. Leave a field empty to clear it.'), form);
}

function privacySection(): HTMLElement {
  const toggle = h('input', { type: 'checkbox', class: 'switch', role: 'switch', 'data-testid': 'private-toggle', 'aria-describedby': 'private-help' });
  toggle.disabled = true;
  const state = h('div', {});
  const requests = h('ul', { class: 'list', 'data-testid': 'follow-requests' });
  const load = () =>
    loadInto(
      state,
      () => q<{ viewer: { private: boolean; followRequests: Connection<User> } | null }>(`{ viewer { id private followRequests(first: 50) { edges { cursor node { ${USER} } } } } }`),
      (d) => {
        toggle.checked = !!d.viewer?.private;
        toggle.disabled = false;
        const edges = d.viewer?.followRequests.edges ?? [];
        requests.replaceChildren(...edges.map((e) => requestRow(e.node, load)));
        requests.hidden = edges.length === 0;
        return edges.length ? [h('h3', { class: 'subhead' }, `Follow requests (${edges.length})`)] : [d.viewer?.private ? empty('No follow requests', 'People who ask to follow you show here for you to approve.') : h('span', {})];
      },
      'your privacy settings',
    );
  toggle.addEventListener('change', () => {
    const want = toggle.checked;
    toggle.disabled = true;
    clearError();
    q<{ setPrivate: { private: boolean } }>('mutation($p: Boolean!) { setPrivate(private: $p) { id private } }', { p: want })
      .then((d) => {
        toggle.checked = d.setPrivate.private;
        showNotice(d.setPrivate.private ? 'Your account is private: you approve new followers.' : 'Your account is public.');
        void load();
      })
      .catch((err) => {
        toggle.checked = !want;
        showError(err);
      })
      .finally(() => (toggle.disabled = false));
  });
  void load();
  return section(
    'Privacy',
    'settings-privacy',
    h('label', { class: 'switch-row' }, h('span', {}, h('strong', {}, 'Private account'), h('span', { id: 'private-help', class: 'muted small block' }, 'Approve who follows you. Only your followers see your posts, likes and follows.')), toggle),
    state,
    requests,
  );
}

// messagesSection sets who may send the viewer direct messages; groups
// are not concerned.
function messagesSection(): HTMLElement {
  const options = [
    ['EVERYONE', 'Everyone', 'Anyone you have not blocked.'],
    ['FOLLOWING', 'People I follow', 'Only accounts you follow.'],
    ['NOBODY', 'Nobody', 'Direct messages to you are refused. Groups still reach you.'],
  ] as const;
  const radios = options.map(([value]) => h('input', { type: 'radio', name: 'messagesFrom', value, disabled: true, 'data-testid': `messages-from-${value.toLowerCase()}` }));
  const group = h(
    'fieldset',
    { class: 'radio-group', 'data-testid': 'messages-from' },
    h('legend', { class: 'field-label' }, 'Who can message me'),
    ...options.map(([, label, help], i) => h('label', { class: 'radio-row' }, radios[i], h('span', {}, h('strong', {}, label), h('span', { class: 'muted small block' }, help)))),
  );
  const set = (policy: string) => {
    for (const r of radios) {
      r.checked = r.value === policy;
      r.disabled = false;
    }
  };
  q<{ viewer: { messagesFrom: string } | null }>('{ viewer { id messagesFrom } }')
    .then((d) => d.viewer && set(d.viewer.messagesFrom))
    .catch(showError);
  for (const r of radios) {
    r.addEventListener('change', () => {
      for (const x of radios) x.disabled = true;
      clearError();
      q<{ setMessagesFrom: { messagesFrom: string } }>('mutation($p: MessagePolicy!) { setMessagesFrom(policy: $p) { id messagesFrom } }', { p: r.value })
        .then((d) => {
          set(d.setMessagesFrom.messagesFrom);
          showNotice(`Who can message you: ${options.find(([v]) => v === d.setMessagesFrom.messagesFrom)?.[1].toLowerCase()}.`);
        })
        .catch((err) => {
          // What the server has is read again: the choice did not take.
          showError(err);
          void q<{ viewer: { messagesFrom: string } | null }>('{ viewer { id messagesFrom } }').then((d) => d.viewer && set(d.viewer.messagesFrom), showError);
        });
    });
  }
  return section('Messages', 'settings-messages', group);
}

function requestRow(u: User, reload: () => Promise<void>): HTMLLIElement {
  const approve = btn('Approve', 'primary', { 'data-testid': 'request-approve', class: 'btn-sm' });
  const reject = btn('Decline', 'secondary', { 'data-testid': 'request-reject', class: 'btn-sm' });
  for (const [b, op, word] of [
    [approve, 'approveFollow', 'now follows you'],
    [reject, 'rejectFollow', "'s request was declined"],
  ] as const) {
    b.addEventListener('click', () =>
      void act(b, async () => {
        await q(userMutation(op), { id: u.id });
        showNotice(`@${u.handle}${word.startsWith("'") ? word : ' ' + word}.`);
        await reload();
      }),
    );
  }
  return userRow(u, 'follow-request', 'row-follow', undefined, h('div', { class: 'row' }, reject, approve));
}

function listSection(title: string, field: 'blocked' | 'muted', op: 'unblock' | 'unmute', label: string, none: string, testid: string): HTMLElement {
  const list = h('ul', { class: 'list', 'data-testid': testid });
  const state = h('div', {});
  const load = (): Promise<void> =>
    loadInto(
      state,
      () => q<{ viewer: Record<string, Connection<User>> | null }>(`{ viewer { id ${field}(first: 50) { edges { cursor node { ${USER} } } } } }`),
      (d) => {
        const edges = d.viewer?.[field].edges ?? [];
        list.replaceChildren(
          ...edges.map((e) => {
            const b = btn(label, 'secondary', { 'data-testid': `row-${op}`, class: 'btn-sm' });
            b.addEventListener('click', () =>
              void act(b, async () => {
                await q(userMutation(op), { id: e.node.id });
                showNotice(`@${e.node.handle} is ${op}ed.`);
                bus.dispatchEvent(new Event('userBack'));
                await load();
              }),
            );
            return userRow(e.node, `${field}-row`, 'row-follow', undefined, b);
          }),
        );
        list.hidden = edges.length === 0;
        return edges.length ? [] : empty(none);
      },
      title.toLowerCase(),
    );
  void load();
  return section(title, `settings-${field}`, state, list);
}

function passwordSection(): HTMLElement {
  const old = h('input', { class: 'input', type: 'password', required: true, autocomplete: 'current-password', 'data-testid': 'old-password' });
  const fresh = h('input', { class: 'input', type: 'password', required: true, minlength: '8', autocomplete: 'new-password', 'data-testid': 'new-password' });
  const again = h('input', { class: 'input', type: 'password', required: true, autocomplete: 'new-password', 'data-testid': 'new-password-again' });
  const problem = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'password-error', hidden: true });
  const save = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'change-password' }, 'Change password');
  const form = h('form', { class: 'stack' }, field('Current password', old), field('New password', fresh, '(8 characters or more)'), field('New password again', again), problem, h('div', { class: 'row' }, save));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    problem.hidden = true;
    if (fresh.value !== again.value) {
      problem.textContent = "The new passwords don't match.";
      problem.hidden = false;
      return;
    }
    void act(save, async () => {
      try {
        await q('mutation($o: String!, $n: String!) { changePassword(oldPassword: $o, newPassword: $n) }', { o: old.value, n: fresh.value });
      } catch (err) {
        if (err instanceof ApiError && (err.code === 'UNAUTHENTICATED' || err.code === 'BAD_USER_INPUT')) {
          problem.textContent = err.code === 'UNAUTHENTICATED' ? 'Your current password is not right.' : `Please choose another password: ${err.message}.`;
          problem.hidden = false;
          return;
        }
        throw err;
      }
      form.reset();
      showNotice('Password changed. Your other sessions were signed out.');
    });
  });
  return section('Password', 'settings-password', h('p', { class: 'muted small' }, 'Changing it signs you out everywhere else.'), form);
}

function exportSection(v: Viewer): HTMLElement {
  const b = btn('Download my data', 'secondary', { 'data-testid': 'export' });
  b.addEventListener('click', () =>
    void act(b, async () => {
      const d = await q<{ exportAccount: string }>('{ exportAccount }');
      const url = URL.createObjectURL(new Blob([d.exportAccount], { type: 'application/json' }));
      const a = h('a', { href: url, download: `herald-${v.handle}.json`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      showNotice('Your data is downloading.');
    }),
  );
  return section('Your data', 'settings-export', h('p', { class: 'muted small' }, 'Everything your account holds — profile, posts, follows, likes, blocks and mutes — as one JSON file.'), b);
}

function sessionsSection(hooks: SettingsHooks): HTMLElement {
  const b = btn('Log out everywhere', 'secondary', { 'data-testid': 'logout-everywhere', title: 'End every session of this account, on every device' });
  b.addEventListener('click', () => hooks.logOutEverywhere());
  return section('Sessions', 'settings-sessions', h('p', { class: 'muted small' }, 'Signs this account out on every device, this one included.'), b);
}

function deleteSection(hooks: SettingsHooks): HTMLElement {
  const b = btn('Delete my account', 'danger', { 'data-testid': 'delete-account' });
  b.addEventListener('click', () =>
    void act(b, async () => {
      const pw = await confirmDialog({
        title: 'Delete your account?',
        body: 'Your profile, posts, likes, follows and notifications are removed for good. This cannot be undone. Enter your password to confirm.',
        confirm: 'Delete account',
        danger: true,
        password: true,
      });
      if (pw === null) return;
      try {
        await q<{ deleteAccount: boolean }>('mutation($p: String!) { deleteAccount(password: $p) }', { p: pw });
      } catch (err) {
        if (err instanceof ApiError && err.code === 'UNAUTHENTICATED') throw new ApiError('WRONG_PASSWORD', 'wrong password');
        throw err;
      }
      hooks.signedOut('Your account was deleted. Goodbye!');
    }),
  );
  return section('Delete account', 'settings-danger', h('p', { class: 'muted small' }, 'Permanently removes your account and everything in it.'), b);
}
