// The signed-in session, the toasts that report on actions, and the
// events the views tell each other about.
import { ApiError, gql } from './api';
import { must } from './dom';
import { friendly } from './errors';
import { EXTRAS } from './queries';
import type { Message, UserExtras, UserRef } from './types';

const TOKEN_KEY = 'herald.token';

export interface Viewer extends UserRef {
  bio: string | null;
  websiteUrl: string | null;
}

export const session = {
  token: localStorage.getItem(TOKEN_KEY) as string | null,
  viewer: null as Viewer | null,
};

export function setToken(t: string | null): void {
  session.token = t;
  if (t) localStorage.setItem(TOKEN_KEY, t);
  else localStorage.removeItem(TOKEN_KEY);
}

// q runs an operation as the signed-in viewer.
export function q<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  return gql<T>(query, variables, session.token);
}

// extras reads the new API's fields of users, or nothing when the server
// cannot answer them: the page then shows what it knows.
export async function extras(ids: string[]): Promise<Map<string, UserExtras>> {
  const out = new Map<string, UserExtras>();
  if (ids.length === 0) return out;
  try {
    const d = await q<{ nodes: (UserExtras | null)[] }>(`query($ids: [ID!]!) { nodes(ids: $ids) { ... on User { ${EXTRAS} } } }`, { ids });
    for (const u of d.nodes) if (u?.id) out.set(u.id, u);
  } catch {
    // Left out: the buttons fall back to follow and unfollow.
  }
  return out;
}

// ---- events between views ----

export const bus = new EventTarget();

// messageChanged tells every view showing m to show it as it is now.
export function messageChanged(m: Message): void {
  bus.dispatchEvent(new CustomEvent<Message>('message', { detail: m }));
}

export function messageDeleted(id: string): void {
  bus.dispatchEvent(new CustomEvent<string>('deleted', { detail: id }));
}

// ---- toasts ----

const errorBox = must('error');
const errorText = must('error-text');
const notice = must('notice');
let onUnauthenticated: () => void = () => {};
let noticeTimer: ReturnType<typeof setTimeout> | undefined;

export function setUnauthenticatedHandler(f: () => void): void {
  onUnauthenticated = f;
}

export function showError(err: unknown, context: 'default' | 'login' | 'signup' = 'default'): void {
  const { code, text } = friendly(err, context);
  errorText.textContent = text;
  errorBox.dataset.code = code;
  errorBox.hidden = false;
  // A token the server no longer accepts (over HTTP, or in the websocket's
  // connection_init: 4403) ends the session.
  if (context === 'default' && (code === 'UNAUTHENTICATED' || code === 'WS_4403' || code === 'WS_4401') && session.token) onUnauthenticated();
}

export function clearError(): void {
  errorBox.hidden = true;
  errorText.textContent = '';
  delete errorBox.dataset.code;
}

must('error-close').addEventListener('click', clearError);

export function showNotice(text: string): void {
  notice.textContent = text;
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => (notice.hidden = true), 4000);
}

// act runs an action started by button: the button is busy meanwhile, and
// a failure is shown. Background work (null button) leaves the last error
// for the user to read.
export async function act(button: HTMLButtonElement | null, f: () => Promise<void>): Promise<void> {
  if (button) {
    clearError();
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
  }
  try {
    await f();
  } catch (err) {
    showError(err);
  } finally {
    if (button) {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }
}

export { ApiError };
