// Herald's demo client: a small social app on Herald's GraphQL API. This
// module signs in and out and routes between the views:
//
//   #/home                 the home timeline (views/home.ts)
//   #/search[/<query>]     people search (views/search.ts)
//   #/notifications        notifications (views/notifications.ts)
//   #/u/<handle>[/<tab>]   a profile: posts, followers, following, likes
//   #/m/<id>               a conversation (views/thread.ts)
//   #/messages[/...]       direct messages and groups (views/messages.ts)
//   #/settings             settings (views/settings.ts)
import './style.css';

import { ApiError, gql } from './api';
import { h, must } from './dom';
import { friendly } from './errors';
import { USER_REF } from './queries';
import { act, bus, clearError, session, setToken, setUnauthenticatedHandler, showError, showNotice, type Viewer } from './session';
import { fillIcons } from './icons';
import { startClock } from './time';
import { avatar } from './ui';
import { ownProfileChanged, startHome, stopHome } from './views/home';
import { reloadNotifications, startNotifications, stopNotifications } from './views/notifications';
import { renderMessages, startMessages, stopMessages } from './views/messages';
import { renderProfile, type ProfileTab } from './views/profile';
import { renderSearch } from './views/search';
import { renderSettings } from './views/settings';
import { renderThread } from './views/thread';

const VIEWER = `${USER_REF} bio websiteUrl`;

const el = {
  tabs: must('tabs'),
  profileTab: must<HTMLAnchorElement>('tab-profile'),
  session: must('session'),
  viewer: must<HTMLAnchorElement>('viewer'),
  logout: must<HTMLButtonElement>('logout'),
  signin: must('signin'),
  authForm: must<HTMLFormElement>('auth-form'),
  authError: must('auth-error'),
  app: must('app'),
  home: must('view-home'),
  notifications: must('view-notifications'),
  other: must('view-other'),
};

// ---- session ----

async function start(): Promise<void> {
  if (!session.token) return showSignIn();
  try {
    const d = await gql<{ viewer: Viewer | null }>(`{ viewer { ${VIEWER} } }`, {}, session.token);
    if (!d.viewer) throw new ApiError('UNAUTHENTICATED', 'your session has expired; log in again');
    showApp(d.viewer);
  } catch (err) {
    if (err instanceof ApiError && err.code === 'UNAUTHENTICATED') {
      signOut();
      showError(err);
    } else {
      showSignIn();
      showError(err);
    }
  }
}

function showSignIn(): void {
  el.signin.hidden = false;
  el.app.hidden = true;
  el.session.hidden = true;
  el.tabs.hidden = true;
  document.title = 'Herald';
}

function setViewer(v: Viewer): void {
  session.viewer = v;
  el.viewer.replaceChildren(avatar(v, 'sm'), h('span', { class: 'viewer-name' }, v.displayName), h('span', { class: 'sr-only' }, ` (@${v.handle})`));
  el.viewer.title = `${v.displayName} (@${v.handle}): your profile`;
  el.viewer.href = `#/u/${v.handle}`;
  el.profileTab.href = `#/u/${v.handle}`;
}

function showApp(v: Viewer): void {
  setViewer(v);
  el.signin.hidden = true;
  el.session.hidden = false;
  el.tabs.hidden = false;
  el.app.hidden = false;
  startHome();
  startNotifications();
  startMessages();
  route();
}

function signOut(message?: string): void {
  stopHome();
  stopNotifications();
  stopMessages();
  setToken(null);
  session.viewer = null;
  el.other.replaceChildren();
  showSignIn();
  if (message) showNotice(message);
}

setUnauthenticatedHandler(() => signOut());

el.authForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const submitter = (ev as SubmitEvent).submitter as HTMLButtonElement | null;
  const op = submitter?.value === 'signUp' ? 'signUp' : 'logIn';
  const f = new FormData(el.authForm);
  const input: Record<string, string> = { handle: String(f.get('handle')).trim(), password: String(f.get('password')) };
  const displayName = String(f.get('displayName') ?? '').trim();
  if (op === 'signUp' && displayName) input.displayName = displayName;
  const type = op === 'signUp' ? 'SignUpInput' : 'LogInInput';
  el.authError.hidden = true;
  void act(submitter, async () => {
    try {
      const d = await gql<Record<string, { token: string; user: Viewer }>>(`mutation($input: ${type}!) { ${op}(input: $input) { token user { ${VIEWER} } } }`, { input }, null);
      setToken(d[op].token);
      el.authForm.reset();
      if (location.hash === '' || location.hash === '#/') history.replaceState(null, '', '#/home');
      showApp(d[op].user);
    } catch (err) {
      // Shown by the form, in words that fit it.
      const { code, text } = friendly(err, op === 'signUp' ? 'signup' : 'login');
      el.authError.textContent = text;
      el.authError.dataset.code = code;
      el.authError.hidden = false;
    }
  });
});

// Logging out ends the token on the server too (every Herald instance
// refuses it from then on, and closes its websockets); everywhere ends
// every token of the account, on every device. The local session ends
// even when the server cannot be reached.
function logOut(op: 'logOut' | 'logOutEverywhere'): void {
  const t = session.token;
  clearError();
  signOut();
  if (t) void act(null, async () => void (await gql(`mutation { ${op} }`, {}, t)));
}

el.logout.addEventListener('click', () => logOut('logOut'));

// ---- routing ----

function route(): void {
  if (!session.viewer) return;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [name = 'home', arg, sub] = parts;
  const view = name || 'home';
  const active = view === 'u' && arg === session.viewer.handle ? 'profile' : view;
  for (const t of el.tabs.querySelectorAll<HTMLAnchorElement>('.tab')) {
    if (t.dataset.tab === active) t.setAttribute('aria-current', 'page');
    else t.removeAttribute('aria-current');
  }
  el.home.hidden = view !== 'home';
  el.notifications.hidden = view !== 'notifications';
  el.other.hidden = view === 'home' || view === 'notifications';
  const titles: Record<string, string> = { home: 'Home', notifications: 'Notifications', search: 'Search', settings: 'Settings', m: 'Conversation', messages: 'Messages' };
  document.title = `${view === 'u' ? `@${arg}` : (titles[view] ?? 'Herald')} · Herald`;
  switch (view) {
    case 'home':
    case 'notifications':
      el.other.replaceChildren();
      break;
    case 'search':
      renderSearch(el.other, arg ?? '');
      break;
    case 'u':
      renderProfile(el.other, (arg ?? '').toLowerCase(), (['followers', 'following', 'likes'].includes(sub ?? '') ? sub : 'posts') as ProfileTab);
      break;
    case 'm':
      renderThread(el.other, arg ?? '');
      break;
    case 'messages':
      renderMessages(el.other, arg, sub);
      break;
    case 'settings':
      renderSettings(el.other, {
        profileSaved: (p) => {
          setViewer(p);
          ownProfileChanged();
        },
        signedOut: (msg) => {
          signOut(msg);
          // The closing websocket's refusal says nothing the notice does not.
          clearError();
        },
        logOutEverywhere: () => logOut('logOutEverywhere'),
      });
      break;
    default:
      location.hash = '#/home';
      return;
  }
  window.scrollTo(0, 0);
}

window.addEventListener('hashchange', () => {
  clearError();
  route();
});

// A reply posted in a conversation shows there at once.
bus.addEventListener('posted', () => {
  if (location.hash.startsWith('#/m/')) route();
});
bus.addEventListener('notificationsChanged', () => reloadNotifications());

fillIcons();
startClock();
void start();
