// The bearer token lives in the Headers pane as an Authorization header, so
// what the pane shows is exactly what is sent. These helpers read and
// rewrite that header in the pane's JSON text.

type Headers = Record<string, unknown>;

function parseHeaders(text: string): Headers | undefined {
  if (text.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Headers) : undefined;
  } catch {
    return undefined;
  }
}

// authorizationOf returns the Authorization value among headers, whatever
// the case of its name, or "".
export function authorizationOf(headers: Headers | undefined): string {
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (k.toLowerCase() === 'authorization' && v != null) return String(v);
  }
  return '';
}

// withToken returns the pane text with its Authorization header set to
// "Bearer <token>" (or removed when token is ""), the other headers kept.
// It returns undefined when the text is not a JSON object, which the user
// must fix first.
export function withToken(text: string, token: string): string | undefined {
  const headers = parseHeaders(text);
  if (!headers) return undefined;
  const out: Headers = {};
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== 'authorization') out[k] = v;
  }
  if (token !== '') out.Authorization = `Bearer ${token}`;
  return Object.keys(out).length === 0 ? '' : JSON.stringify(out, null, 2);
}

// tokenOfText returns the bearer token in the pane text, or "".
export function tokenOfText(text: string): string {
  const m = /^Bearer\s+(\S+)$/i.exec(authorizationOf(parseHeaders(text)).trim());
  return m ? m[1] : '';
}

// Sign-ups and log-ins seen by the fetcher, for the component that writes
// their token into the Headers pane.
export interface IssuedToken {
  token: string;
  handle: string;
}

const listeners = new Set<(t: IssuedToken) => void>();

export function onIssuedToken(f: (t: IssuedToken) => void): () => void {
  listeners.add(f);
  return () => listeners.delete(f);
}

export function issueToken(t: IssuedToken): void {
  for (const f of listeners) f(t);
}
