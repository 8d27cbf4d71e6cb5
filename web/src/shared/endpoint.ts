// Herald serves its API on the same origin as these pages, so both
// endpoints derive from the page's own location: no host is configured
// and nothing is requested from anywhere else.

export const graphqlURL = (): string => new URL('/graphql', location.href).href;

// websocketURL is ws:// beside http:// and wss:// beside https://.
export function websocketURL(): string {
  const u = new URL('/graphql', location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

// bearer returns the Authorization value for a token.
export const bearer = (token: string): string => `Bearer ${token}`;
