import { createClient, type Client } from 'graphql-ws';

import { bearer, graphqlURL, websocketURL } from '../shared/endpoint';

// ApiError is a failed operation as the user is shown it: the server's
// extensions.code (or NETWORK / HTTP_<status> when no GraphQL answer came
// back) and its message.
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface GraphQLError {
  message: string;
  extensions?: { code?: string };
}

function firstError(errors: GraphQLError[]): ApiError {
  const e = errors[0];
  return new ApiError(e.extensions?.code ?? 'ERROR', e.message);
}

// gql runs a query or mutation over HTTP and returns its data, or throws an
// ApiError for the first error.
export async function gql<T>(query: string, variables: Record<string, unknown>, token: string | null): Promise<T> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/graphql-response+json, application/json',
  };
  if (token) headers.Authorization = bearer(token);
  let res: Response;
  try {
    res = await fetch(graphqlURL(), { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  } catch (err) {
    throw new ApiError('NETWORK', `the server cannot be reached (${(err as Error).message})`);
  }
  const text = await res.text();
  let body: { data?: T | null; errors?: GraphQLError[] };
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(`HTTP_${res.status}`, text.trim() || res.statusText);
  }
  if (body.errors?.length) throw firstError(body.errors);
  if (body.data == null) throw new ApiError(`HTTP_${res.status}`, 'no data in the response');
  return body.data;
}

export type LiveState = 'connecting' | 'live' | 'offline';

export interface LiveHandlers<T> {
  event(data: T): void;
  error(err: ApiError): void;
  state(s: LiveState): void;
}

// subscribe keeps one graphql-transport-ws subscription open with the token
// in connection_init, reconnecting after a dropped connection. It calls
// variables each time it subscribes, on the first connection and on every
// reconnect, so that a reconnect resumes after the newest event received.
// It returns a function that closes it.
export function subscribe<T>(
  query: string,
  token: string,
  variables: () => Record<string, unknown>,
  h: LiveHandlers<T>,
): () => void {
  const client: Client = createClient({
    url: websocketURL(),
    connectionParams: { authorization: bearer(token) },
    lazy: false,
    retryAttempts: 10,
    // A refused token (4401, 4403) will not get better by retrying.
    shouldRetry: (e) => !(e && typeof e === 'object' && 'code' in e && [4401, 4403].includes((e as CloseEvent).code)),
    on: {
      connecting: () => h.state('connecting'),
      connected: () => h.state('live'),
      closed: () => h.state('offline'),
    },
  });
  // graphql-ws sends this same payload again on every reconnect: the getter
  // reads the variables afresh each time it is serialized.
  const payload = {
    query,
    get variables() {
      return variables();
    },
  };
  // The server ends a subscription that falls too far behind (it keeps a
  // bounded queue of undelivered events per subscriber), with a complete
  // on a connection that stays open. Subscribing again, with the variables
  // read afresh, resumes after the newest event received: none missed.
  // Waits double from 0.5 s to 30 s while no event arrives in between.
  let closed = false;
  let wait = 500;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let dispose = () => {};
  const start = () => {
    dispose = client.subscribe<T>(payload, {
      next: (r) => {
        wait = 500;
        if (r.errors?.length) h.error(firstError(r.errors as GraphQLError[]));
        else if (r.data) h.event(r.data);
      },
      error: (e) => {
        if (Array.isArray(e)) h.error(firstError(e as GraphQLError[]));
        else if (e && typeof e === 'object' && 'code' in e) {
          const c = e as CloseEvent;
          h.error(new ApiError(`WS_${c.code}`, c.reason || 'the live connection closed'));
        } else h.error(new ApiError('NETWORK', 'the live connection failed'));
        h.state('offline');
      },
      complete: () => {
        if (closed) return;
        // The connection itself stays open: the state stays what it is.
        timer = setTimeout(start, wait);
        wait = Math.min(wait * 2, 30_000);
      },
    });
  };
  start();
  return () => {
    closed = true;
    clearTimeout(timer);
    dispose();
    void client.dispose();
  };
}
