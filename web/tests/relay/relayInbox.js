// A Relay client of Herald's home timeline, bundled by relay.test.mjs into a
// page that the test drives in Chromium. Its operations are compiled by
// relay-compiler against schema.graphqls; relay.test.mjs's Vite plugin turns
// each graphql tag into an import of its artifact, as babel-plugin-relay
// does. Nothing here updates the store by hand: the subscription's
// directives (@prependEdge, @deleteEdge, @deleteRecord) and normalization by
// id keep the inbox connection right.
import { createClient } from 'graphql-ws';
import {
  Environment,
  Network,
  Observable,
  RecordSource,
  Store,
  commitMutation,
  createOperationDescriptor,
  fetchQuery,
  getRequest,
  requestSubscription,
} from 'relay-runtime';

// The home timeline's first page. `__id` is the connection's record id in
// the store, which the subscription's directives are given.
const inboxQuery = graphql`
  query relayInboxQuery {
    inbox(first: 20) @connection(key: "relayInbox_inbox") {
      __id
      totalCount
      unreadCount
      edges {
        cursor
        deliveredAt
        node {
          id
          text
          editedAt
        }
      }
    }
  }
`;

// Every inbox event, each applied by a directive on the field that only its
// type sets: ADDED's edge is prepended to the connection (Relay skips an
// edge whose node is already in it); EDITED's message updates the record
// of the same id; DELETED's id removes the edge, then the record (the
// aliased @deleteEdge comes first, as it finds the edge through the
// record); REMOVED's id removes the edge and keeps the record.
const inboxEventsSubscription = graphql`
  subscription relayInboxEventsSubscription($connections: [ID!]!) {
    inboxEvents {
      type
      edge @prependEdge(connections: $connections) {
        cursor
        deliveredAt
        node {
          id
          text
          editedAt
        }
      }
      message {
        id
        text
        editedAt
      }
      deletedEdge: deletedMessageId @deleteEdge(connections: $connections)
      deletedMessageId @deleteRecord
      removedMessageId @deleteEdge(connections: $connections)
      unreadCount
      totalCount
    }
  }
`;

const unfollowMutation = graphql`
  mutation relayInboxUnfollowMutation($id: ID!) {
    unfollow(userId: $id) {
      id
      viewerFollows
    }
  }
`;

const markReadMutation = graphql`
  mutation relayInboxMarkReadMutation {
    markInboxRead
  }
`;

const graphqlURL = () => new URL('/graphql', location.href).href;

function websocketURL() {
  const u = new URL('/graphql', location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

// createEnvironment returns a Relay environment that sends queries and
// mutations over HTTP and subscriptions over one graphql-transport-ws
// connection, both with token as web/src/app does, and the websocket
// client to dispose of.
function createEnvironment(token) {
  const authorization = `Bearer ${token}`;
  const ws = createClient({ url: websocketURL(), connectionParams: { authorization }, lazy: false, retryAttempts: 0 });
  const fetchFn = async (params, variables) => {
    const res = await fetch(graphqlURL(), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/graphql-response+json, application/json', Authorization: authorization },
      body: JSON.stringify({ query: params.text, variables }),
    });
    return res.json();
  };
  const subscribeFn = (params, variables) =>
    Observable.create((sink) => ws.subscribe({ operationName: params.name, query: params.text, variables }, sink));
  const environment = new Environment({
    network: Network.create(fetchFn, subscribeFn),
    store: new Store(new RecordSource()),
  });
  return { environment, ws };
}

// The test's handle on the page: window.relayInbox.
const state = { environment: null, ws: null, connectionID: null, events: [], errors: [], disposables: [] };
const operation = createOperationDescriptor(getRequest(inboxQuery), {});

// recordState tells whether the store holds a record for id: 'present',
// 'deleted' (a tombstone @deleteRecord leaves) or 'unknown'.
function recordState(id) {
  const r = state.environment.getStore().getSource().get(id);
  return r === undefined ? 'unknown' : r === null ? 'deleted' : 'present';
}

window.relayInbox = {
  // start loads the inbox as token's owner, keeps it retained, and opens
  // the subscription `subscriptions` times: two open at once deliver each
  // event twice, which is how a duplicate ADDED is tested.
  async start(token, subscriptions) {
    Object.assign(state, createEnvironment(token));
    state.disposables.push(state.environment.retain(operation));
    const data = await fetchQuery(state.environment, inboxQuery, {}).toPromise();
    state.connectionID = data.inbox.__id;
    for (let i = 0; i < subscriptions; i++) {
      state.disposables.push(
        requestSubscription(state.environment, {
          subscription: inboxEventsSubscription,
          variables: { connections: [state.connectionID] },
          onNext: (r) => state.events.push({ subscription: i, ...r.inboxEvents }),
          onError: (e) => state.errors.push(String(e?.message ?? e)),
        }),
      );
    }
    return state.connectionID;
  },

  // snapshot reads the inbox query from the store alone (no network), and
  // the state of the records named by ids.
  snapshot(ids = []) {
    const snap = state.environment.lookup(operation.fragment);
    const inbox = snap.data?.inbox;
    return {
      isMissingData: snap.isMissingData,
      connectionID: inbox?.__id ?? null,
      totalCount: inbox?.totalCount ?? null,
      unreadCount: inbox?.unreadCount ?? null,
      edges: (inbox?.edges ?? []).map((e) => ({ cursor: e?.cursor ?? null, deliveredAt: e?.deliveredAt ?? null, node: e?.node ?? null })),
      records: Object.fromEntries(ids.map((id) => [id, recordState(id)])),
    };
  },

  events: () => state.events,
  errors: () => state.errors,

  // commit runs one of the mutations above through Relay, with no updater.
  commit(name, variables = {}) {
    const mutation = { unfollow: unfollowMutation, markRead: markReadMutation }[name];
    return new Promise((resolve, reject) => {
      commitMutation(state.environment, {
        mutation,
        variables,
        onCompleted: (data, errors) => (errors?.length ? reject(new Error(JSON.stringify(errors))) : resolve(data)),
        onError: reject,
      });
    });
  },

  async stop() {
    for (const d of state.disposables.splice(0)) d.dispose();
    await state.ws?.dispose();
  },
};
