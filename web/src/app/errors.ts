import { ApiError } from './api';

// friendly words a failed operation for the person using the app; the
// code stays available (data-code on the toast) for those who need it.
export function friendly(err: unknown, context: 'default' | 'login' | 'signup' = 'default'): { code: string; text: string } {
  const e = err instanceof ApiError ? err : new ApiError('ERROR', String((err as Error)?.message ?? err));
  return { code: e.code, text: textOf(e, context) };
}

function sentence(s: string): string {
  const t = s.trim().replace(/^graphql:\s*/i, '');
  if (!t) return '';
  const u = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(u) ? u : `${u}.`;
}

function textOf(e: ApiError, context: string): string {
  switch (e.code) {
    case 'UNAUTHENTICATED':
      if (context === 'login') return "That handle and password don't match. Check them and try again.";
      return 'Your session has ended. Please sign in again.';
    case 'WS_4401':
    case 'WS_4403':
      return 'You were signed out: this session was ended, here or on another device.';
    case 'WRONG_PASSWORD':
      return "That password isn't right, so nothing was deleted.";
    case 'RATE_LIMITED':
      return "You're doing that too fast — try again in a moment.";
    case 'NOT_FOUND':
      return "That isn't there any more — it may have been deleted.";
    case 'FORBIDDEN':
      return "You can't do that here.";
    case 'CONFLICT':
      return context === 'signup' ? 'That handle is taken. Pick another one, or log in if it is yours.' : 'That conflicts with something that already exists.';
    case 'BAD_USER_INPUT':
      return `Please check: ${sentence(e.message)}`;
    case 'NETWORK':
      return "Can't reach Herald right now. Check your connection and try again.";
    case 'RESUME_EXPIRED':
      return 'Live updates were interrupted; the page was refreshed.';
    case 'INTERNAL':
      return 'Something went wrong on our side. Please try again.';
    default:
      if (e.code.startsWith('HTTP_5')) return 'Herald is having trouble right now. Please try again shortly.';
      if (e.code.startsWith('WS_')) return 'Live updates stopped. Reload the page to resume them.';
      return 'Something went wrong. Please try again.';
  }
}
