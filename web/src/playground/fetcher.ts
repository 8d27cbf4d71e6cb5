import type { GraphiQLProps } from 'graphiql';
import { getOperationAST, parse, type DocumentNode } from 'graphql';
import { createClient, type Client } from 'graphql-ws';

import { graphqlURL, websocketURL } from '../shared/endpoint';
import { carryFrom, setViewerHandle } from './carry';
import { authorizationOf, issueToken } from './token';

type Fetcher = GraphiQLProps['fetcher'];
type Params = Parameters<Fetcher>[0];
type Result = Record<string, unknown>;

// One websocket client at a time, for one Authorization value: the token
// goes into connection_init, which is sent once per connection, so a
// changed token needs a new client (and connection).
let ws: { authorization: string; client: Client } | undefined;

function wsClient(authorization: string): Client {
  if (ws?.authorization === authorization) return ws.client;
  void ws?.client.dispose();
  const client = createClient({
    url: websocketURL(),
    connectionParams: authorization ? { authorization } : {},
    // A refused or dropped connection is shown in the result pane rather
    // than retried in the background: the user runs the operation again.
    retryAttempts: 0,
  });
  ws = { authorization, client };
  return client;
}

function isSubscription(params: Params, doc: DocumentNode | undefined): boolean {
  try {
    const op = getOperationAST(doc ?? parse(params.query), params.operationName ?? undefined);
    return op?.operation === 'subscription';
  } catch {
    // Unparsable: let the server say what is wrong.
    return false;
  }
}

// describeWSError turns what graphql-ws reports into something the result
// pane shows well: GraphQL errors as they are, a closed socket as its code
// and reason (4403 for a refused token, for example).
function describeWSError(err: unknown): unknown {
  if (Array.isArray(err)) return err;
  if (err && typeof err === 'object' && 'code' in err) {
    const e = err as { code: number; reason?: string };
    return { message: `websocket closed: ${e.code}${e.reason ? ` ${e.reason}` : ''}` };
  }
  if (err instanceof Error) return { message: err.message };
  return { message: 'websocket failed (is the server running?)' };
}

async function post(params: Params, headers: Record<string, unknown>): Promise<Result> {
  const sent: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/graphql-response+json, application/json',
  };
  for (const [k, v] of Object.entries(headers)) {
    if (v != null) sent[k] = String(v);
  }
  const res = await fetch(graphqlURL(), { method: 'POST', headers: sent, body: JSON.stringify(params) });
  const text = await res.text();
  let body: Result;
  try {
    body = JSON.parse(text) as Result;
  } catch {
    return { errors: [{ message: `HTTP ${res.status}: ${text.trim()}` }] };
  }
  // A sign-up or log-in hands its token to the Headers pane.
  const data = body.data as Record<string, { token?: unknown; user?: { handle?: unknown } } | null> | undefined;
  const auth = data?.signUp ?? data?.logIn;
  if (auth && typeof auth.token === 'string') {
    setViewerHandle(String(auth.user?.handle ?? ''));
    issueToken({ token: auth.token, handle: String(auth.user?.handle ?? '') });
  }
  // Ids the result shows go into the Variables pane for the next operation.
  carryFrom(body.data);
  return body;
}

// fetcher sends queries and mutations over HTTP POST and subscriptions over
// graphql-transport-ws, both with the Authorization header of the Headers
// pane: as a header over HTTP, and in the connection_init payload over the
// websocket.
export const fetcher: Fetcher = (params, opts) => {
  const headers = (opts?.headers ?? {}) as Record<string, unknown>;
  if (!isSubscription(params, opts?.documentAST)) return post(params, headers);
  const client = wsClient(authorizationOf(headers));
  return {
    subscribe(sink: { next: (r: Result) => void; error: (e: unknown) => void; complete: () => void }) {
      const dispose = client.subscribe(
        { query: params.query, operationName: params.operationName, variables: params.variables },
        {
          next: (r) => {
            carryFrom(r.data);
            sink.next(r as Result);
          },
          error: (e) => sink.error(describeWSError(e)),
          complete: () => sink.complete(),
        },
      );
      return { unsubscribe: dispose };
    },
  } as unknown as ReturnType<Fetcher>;
};
