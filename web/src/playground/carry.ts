// Ids carried from one result into the next operation: the fetcher hands
// each result here, and the Variables pane gets the newest user, message,
// notification group, conversation and conversation message ids that
// results showed, as "userId", "messageId", "groupId", "conversationId"
// and "conversationMessageId". So FindUser then Follow, Inbox then Like, or
// FollowRequests then ApproveFollow run one after the other with no
// copying by hand.

export const CARRIED_KEYS = ['userId', 'messageId', 'groupId', 'conversationId', 'conversationMessageId'] as const;

type CarriedKey = (typeof CARRIED_KEYS)[number];

export interface Carried {
  userId?: string;
  messageId?: string;
  groupId?: string;
  conversationId?: string;
  conversationMessageId?: string;
  // What the carried ids name, for the status line: a handle, a text.
  labels: Partial<Record<CarriedKey, string>>;
}

type Obj = Record<string, unknown>;

// Fields whose object is the viewer (or the viewer's session): its own id
// is not carried (following yourself is refused), though what it holds
// (followRequests, blocked, messages) is.
const SELF = new Set(['viewer', 'signUp', 'logIn', 'updateProfile', 'setPrivate', 'setAttributes']);

let viewerHandle = '';

export function setViewerHandle(handle: string): void {
  viewerHandle = handle.toLowerCase();
}

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

function kindOf(o: Obj): CarriedKey | null {
  if (typeof o.id !== 'string') return null;
  if ('latestAt' in o || 'latestActors' in o) return 'groupId';
  // A conversation message has text too: its seq or its conversation's id
  // tells it from a post.
  if ('seq' in o || 'conversationId' in o) return 'conversationMessageId';
  if ('isGroup' in o || 'memberCount' in o || 'peer' in o || 'lastMessage' in o) return 'conversationId';
  if ('handle' in o) return 'userId';
  if ('text' in o || 'likeCount' in o || 'repostCount' in o || 'replyCount' in o || 'viewerHasLiked' in o) return 'messageId';
  return null;
}

// idsOf finds, depth first in the result's order, the first id of each
// kind: the newest inbox item, the first search hit, the user just found.
export function idsOf(data: unknown): Carried {
  const out: Carried = { labels: {} };
  const walk = (v: unknown, self: boolean): void => {
    if (Array.isArray(v)) return v.forEach((x) => walk(x, false));
    if (!isObj(v)) return;
    const k = kindOf(v);
    const isViewer = k === 'userId' && (self || (viewerHandle !== '' && String(v.handle).toLowerCase() === viewerHandle));
    if (k && !out[k] && !isViewer) {
      out[k] = v.id as string;
      out.labels[k] = k === 'userId' ? `@${String(v.handle)}` : typeof v.text === 'string' ? `“${v.text.slice(0, 24)}”` : '';
    }
    // A message sent names its conversation, which the next send, read or
    // group change needs.
    if (k === 'conversationMessageId' && typeof v.conversationId === 'string' && !out.conversationId) {
      out.conversationId = v.conversationId;
    }
    for (const child of Object.values(v)) walk(child, false);
  };
  if (isObj(data)) for (const [key, v] of Object.entries(data)) walk(v, SELF.has(key));
  return out;
}

const listeners = new Set<(c: Carried) => void>();

export function onCarried(f: (c: Carried) => void): () => void {
  listeners.add(f);
  return () => listeners.delete(f);
}

// carryFrom takes a result's data and tells the listeners what it found.
export function carryFrom(data: unknown): void {
  const c = idsOf(data);
  if (!CARRIED_KEYS.some((k) => c[k])) return;
  for (const f of listeners) f(c);
}

// withCarried returns the Variables pane's text with the carried ids set,
// the other variables kept; undefined when the text is not a JSON object.
export function withCarried(text: string, c: Carried): string | undefined {
  let vars: Obj;
  try {
    const v: unknown = text.trim() === '' ? {} : JSON.parse(text);
    if (!isObj(v)) return undefined;
    vars = v;
  } catch {
    return undefined;
  }
  let changed = false;
  for (const k of CARRIED_KEYS) {
    if (c[k] && vars[k] !== c[k]) {
      vars[k] = c[k];
      changed = true;
    }
  }
  return changed ? JSON.stringify(vars, null, 2) : text;
}
