import{g as w,c as v,w as I}from"./endpoint-DHTdaLEw.js";import{g as S,p as $,c as E,j as o,r as c,G as l,u as p,T}from"./vendor-Dv8STY8J.js";import"./runtime-Bpr93w1e.js";const j=`# Herald's GraphQL playground: one named operation per
# step. Press the run button and pick one, or put the
# cursor in it and press Ctrl-Enter. Variables are in the
# Variables pane below; the Headers pane holds your token.
#
# 1. SignUp creates an account (LogIn signs in). Its token
#    goes into the Headers pane as an Authorization header,
#    sent with every request and in the websocket's
#    connection_init. The key button sets a token by hand.
# 2. FindUser looks someone up by handle: copy their id
#    into "userId" in the Variables pane.
# 3. Follow follows them: their posts reach your inbox.
# 4. Post writes a message to your followers' inboxes;
#    each @handle in it is a mention.
# 5. Inbox reads your home timeline, newest first, with
#    its counts; for the next page, pass its endCursor as
#    "after". MarkRead clears the unread count. Like likes
#    the message in "messageId" (copy one from the inbox),
#    Unlike takes it back; MyLikes lists what you like;
#    Thread shows its replies and its thread's root.
# 6. InboxEvents keeps a websocket open and shows each
#    change to your inbox as it happens, until you press
#    stop: ADDED (edge), EDITED (message), DELETED
#    (deletedMessageId), REMOVED (removedMessageId: you
#    unfollowed its author), READ. To resume after a
#    dropped connection, pass the last event's cursor as
#    "after": you get what you missed, then live events.
# 7. LogOut ends the token in the Headers pane at once,
#    on every server: its websockets close with 4403.
#    LogOutEverywhere ends every token of your account.

mutation SignUp($handle: String!, $password: String!, $displayName: String) {
  signUp(input: {handle: $handle, password: $password, displayName: $displayName}) {
    token
    expiresAt
    user {
      id
      handle
      displayName
    }
  }
}

mutation LogIn($handle: String!, $password: String!) {
  logIn(input: {handle: $handle, password: $password}) {
    token
    expiresAt
    user {
      id
      handle
    }
  }
}

query FindUser($followHandle: String!) {
  user(handle: $followHandle) {
    id
    handle
    displayName
    followerCount
    viewerFollows
  }
}

mutation Follow($userId: ID!) {
  follow(userId: $userId) {
    handle
    followerCount
    viewerFollows
  }
}

mutation Post($text: String!) {
  postMessage(input: {text: $text}) {
    id
    text
    createdAt
    mentions {
      handle
    }
  }
}

query Inbox($after: String) {
  inbox(first: 20, after: $after) {
    totalCount
    unreadCount
    rebuilding
    edges {
      deliveredAt
      node {
        id
        text
        kind
        createdAt
        editedAt
        author {
          handle
          displayName
        }
        mentions {
          handle
        }
        likeCount
        viewerHasLiked
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}

mutation MarkRead {
  markInboxRead
}

mutation Like($messageId: ID!) {
  like(messageId: $messageId) {
    id
    likeCount
    viewerHasLiked
  }
}

mutation Unlike($messageId: ID!) {
  unlike(messageId: $messageId) {
    id
    likeCount
    viewerHasLiked
  }
}

query MyLikes {
  viewer {
    likes(first: 20) {
      edges {
        likedAt
        node {
          id
          text
          likeCount
          likedBy(first: 3) {
            totalCount
            edges {
              node {
                handle
              }
            }
          }
        }
      }
    }
  }
}

query Thread($messageId: ID!) {
  node(id: $messageId) {
    ... on Message {
      text
      replyCount
      root {
        id
        text
      }
      replies(first: 20) {
        totalCount
        edges {
          node {
            id
            text
            author {
              handle
            }
            replyCount
          }
        }
      }
    }
  }
}

mutation LogOut {
  logOut
}

mutation LogOutEverywhere {
  logOutEverywhere
}

subscription InboxEvents($after: String) {
  inboxEvents(after: $after) {
    type
    cursor
    unreadCount
    totalCount
    edge {
      cursor
      deliveredAt
      node {
        id
        text
        author {
          handle
        }
      }
    }
    message {
      id
      text
    }
    deletedMessageId
    removedMessageId
  }
}
`,C=`{
  "handle": "alice",
  "password": "correct horse",
  "displayName": "Alice",
  "followHandle": "bob",
  "userId": "paste the id FindUser returned",
  "messageId": "paste a message id from Inbox",
  "text": "Hello from the playground, @bob!",
  "after": null
}
`;function m(e){if(e.trim()==="")return{};try{const t=JSON.parse(e);return t!==null&&typeof t=="object"&&!Array.isArray(t)?t:void 0}catch{return}}function y(e){for(const[t,n]of Object.entries(e??{}))if(t.toLowerCase()==="authorization"&&n!=null)return String(n);return""}function L(e,t){const n=m(e);if(!n)return;const s={};for(const[r,a]of Object.entries(n))r.toLowerCase()!=="authorization"&&(s[r]=a);return t!==""&&(s.Authorization=`Bearer ${t}`),Object.keys(s).length===0?"":JSON.stringify(s,null,2)}function k(e){const t=/^Bearer\s+(\S+)$/i.exec(y(m(e)).trim());return t?t[1]:""}const h=new Set;function A(e){return h.add(e),()=>h.delete(e)}function O(e){for(const t of h)t(e)}let u;function N(e){if(u?.authorization===e)return u.client;u?.client.dispose();const t=v({url:I(),connectionParams:e?{authorization:e}:{},retryAttempts:0});return u={authorization:e,client:t},t}function H(e,t){try{return S(t??$(e.query),e.operationName??void 0)?.operation==="subscription"}catch{return!1}}function q(e){if(Array.isArray(e))return e;if(e&&typeof e=="object"&&"code"in e){const t=e;return{message:`websocket closed: ${t.code}${t.reason?` ${t.reason}`:""}`}}return e instanceof Error?{message:e.message}:{message:"websocket failed (is the server running?)"}}async function M(e,t){const n={"Content-Type":"application/json",Accept:"application/graphql-response+json, application/json"};for(const[x,g]of Object.entries(t))g!=null&&(n[x]=String(g));const s=await fetch(w(),{method:"POST",headers:n,body:JSON.stringify(e)}),r=await s.text();let a;try{a=JSON.parse(r)}catch{return{errors:[{message:`HTTP ${s.status}: ${r.trim()}`}]}}const i=a.data,d=i?.signUp??i?.logIn;return d&&typeof d.token=="string"&&O({token:d.token,handle:String(d.user?.handle??"")}),a}const D=(e,t)=>{const n=t?.headers??{};if(!H(e,t?.documentAST))return M(e,n);const s=N(y(n));return{subscribe(r){return{unsubscribe:s.subscribe({query:e.query,operationName:e.operationName,variables:e.variables},{next:i=>r.next(i),error:i=>r.error(q(i)),complete:()=>r.complete()})}}}};function U(){return o.jsxs("svg",{className:"graphiql-toolbar-icon","aria-hidden":"true",viewBox:"0 0 24 24",fill:"none",stroke:"currentColor",strokeWidth:"1.5",children:[o.jsx("circle",{cx:"8",cy:"15",r:"4"}),o.jsx("path",{d:"M11 12l9-9M17 6l3 3M14 9l2 2"})]})}function b(){const e=p(t=>t.headerEditor);return t=>{if(!e)return;const n=L(e.getValue(),t);if(n===void 0){window.alert("The Headers pane must hold a JSON object (for example {}) before a token can be put in it.");return}e.setValue(n)}}function V(){const e=b();return c.useEffect(()=>A(({token:t})=>e(t))),null}function F(){const e=p(s=>s.headerEditor),t=b(),n=()=>{const s=k(e?.getValue()??""),r=window.prompt("Bearer token for HTTP requests and the websocket (empty to remove):",s);r!==null&&t(r.trim().replace(/^Bearer\s+/i,""))};return o.jsx(T,{label:"Set or clear the bearer token",onClick:n,"data-testid":"token-button",children:o.jsx(U,{})})}function B(){const e=p(r=>r.headerEditor),[t,n]=c.useState("");c.useEffect(()=>{if(!e)return;n(e.getValue());const r=e.onDidChangeModelContent(()=>n(e.getValue()));return()=>r.dispose()},[e]);const s=k(t);return o.jsx("p",{className:"herald-token-status","data-testid":"token-status",role:"status",children:s?`Signed in: requests and subscriptions carry the token …${s.slice(-8)} from the Headers pane.`:"No token: run SignUp or LogIn, or press the key button, to act as a user."})}const f=e=>localStorage.getItem(`graphiql:${e}`);function P(){return o.jsxs(l,{fetcher:D,initialQuery:f("query")??j,initialVariables:f("variables")??C,defaultEditorToolsVisibility:"variables",children:[o.jsx(l.Logo,{children:"Herald"}),o.jsx(l.Toolbar,{children:({prettify:e,merge:t,copy:n})=>o.jsxs(o.Fragment,{children:[e,t,n,o.jsx(F,{})]})}),o.jsx(l.Footer,{children:o.jsx(B,{})}),o.jsx(V,{})]})}E.createRoot(document.getElementById("graphiql")).render(o.jsx(c.StrictMode,{children:o.jsx(P,{})}));
