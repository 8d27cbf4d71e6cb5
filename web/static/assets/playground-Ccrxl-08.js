import{g as k,c as v,w as S}from"./endpoint-DHTdaLEw.js";import{g as E,p as j,c as I,j as o,r as c,G as l,u as p,T}from"./vendor-Dv8STY8J.js";import"./runtime-Bpr93w1e.js";const $=`# Herald's GraphQL playground: one named operation per
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
#    "after". MarkRead clears the unread count.
# 6. InboxEvents keeps a websocket open and shows each
#    change to your inbox as it happens, until you press
#    stop: ADDED (edge), EDITED (message), DELETED
#    (deletedMessageId), REMOVED (removedMessageId: you
#    unfollowed its author), READ.
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

mutation LogOut {
  logOut
}

mutation LogOutEverywhere {
  logOutEverywhere
}

subscription InboxEvents {
  inboxEvents {
    type
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
`,O=`{
  "handle": "alice",
  "password": "correct horse",
  "displayName": "Alice",
  "followHandle": "bob",
  "userId": "paste the id FindUser returned",
  "text": "Hello from the playground, @bob!",
  "after": null
}
`;function b(e){if(e.trim()==="")return{};try{const t=JSON.parse(e);return t!==null&&typeof t=="object"&&!Array.isArray(t)?t:void 0}catch{return}}function m(e){for(const[t,n]of Object.entries(e??{}))if(t.toLowerCase()==="authorization"&&n!=null)return String(n);return""}function A(e,t){const n=b(e);if(!n)return;const r={};for(const[s,a]of Object.entries(n))s.toLowerCase()!=="authorization"&&(r[s]=a);return t!==""&&(r.Authorization=`Bearer ${t}`),Object.keys(r).length===0?"":JSON.stringify(r,null,2)}function y(e){const t=/^Bearer\s+(\S+)$/i.exec(m(b(e)).trim());return t?t[1]:""}const h=new Set;function N(e){return h.add(e),()=>h.delete(e)}function C(e){for(const t of h)t(e)}let u;function L(e){if(u?.authorization===e)return u.client;u?.client.dispose();const t=v({url:S(),connectionParams:e?{authorization:e}:{},retryAttempts:0});return u={authorization:e,client:t},t}function q(e,t){try{return E(t??j(e.query),e.operationName??void 0)?.operation==="subscription"}catch{return!1}}function H(e){if(Array.isArray(e))return e;if(e&&typeof e=="object"&&"code"in e){const t=e;return{message:`websocket closed: ${t.code}${t.reason?` ${t.reason}`:""}`}}return e instanceof Error?{message:e.message}:{message:"websocket failed (is the server running?)"}}async function M(e,t){const n={"Content-Type":"application/json",Accept:"application/graphql-response+json, application/json"};for(const[w,f]of Object.entries(t))f!=null&&(n[w]=String(f));const r=await fetch(k(),{method:"POST",headers:n,body:JSON.stringify(e)}),s=await r.text();let a;try{a=JSON.parse(s)}catch{return{errors:[{message:`HTTP ${r.status}: ${s.trim()}`}]}}const i=a.data,d=i?.signUp??i?.logIn;return d&&typeof d.token=="string"&&C({token:d.token,handle:String(d.user?.handle??"")}),a}const V=(e,t)=>{const n=t?.headers??{};if(!q(e,t?.documentAST))return M(e,n);const r=L(m(n));return{subscribe(s){return{unsubscribe:r.subscribe({query:e.query,operationName:e.operationName,variables:e.variables},{next:i=>s.next(i),error:i=>s.error(H(i)),complete:()=>s.complete()})}}}};function D(){return o.jsxs("svg",{className:"graphiql-toolbar-icon","aria-hidden":"true",viewBox:"0 0 24 24",fill:"none",stroke:"currentColor",strokeWidth:"1.5",children:[o.jsx("circle",{cx:"8",cy:"15",r:"4"}),o.jsx("path",{d:"M11 12l9-9M17 6l3 3M14 9l2 2"})]})}function x(){const e=p(t=>t.headerEditor);return t=>{if(!e)return;const n=A(e.getValue(),t);if(n===void 0){window.alert("The Headers pane must hold a JSON object (for example {}) before a token can be put in it.");return}e.setValue(n)}}function F(){const e=x();return c.useEffect(()=>N(({token:t})=>e(t))),null}function U(){const e=p(r=>r.headerEditor),t=x(),n=()=>{const r=y(e?.getValue()??""),s=window.prompt("Bearer token for HTTP requests and the websocket (empty to remove):",r);s!==null&&t(s.trim().replace(/^Bearer\s+/i,""))};return o.jsx(T,{label:"Set or clear the bearer token",onClick:n,"data-testid":"token-button",children:o.jsx(D,{})})}function P(){const e=p(s=>s.headerEditor),[t,n]=c.useState("");c.useEffect(()=>{if(!e)return;n(e.getValue());const s=e.onDidChangeModelContent(()=>n(e.getValue()));return()=>s.dispose()},[e]);const r=y(t);return o.jsx("p",{className:"herald-token-status","data-testid":"token-status",role:"status",children:r?`Signed in: requests and subscriptions carry the token …${r.slice(-8)} from the Headers pane.`:"No token: run SignUp or LogIn, or press the key button, to act as a user."})}const g=e=>localStorage.getItem(`graphiql:${e}`);function R(){return o.jsxs(l,{fetcher:V,initialQuery:g("query")??$,initialVariables:g("variables")??O,defaultEditorToolsVisibility:"variables",children:[o.jsx(l.Logo,{children:"Herald"}),o.jsx(l.Toolbar,{children:({prettify:e,merge:t,copy:n})=>o.jsxs(o.Fragment,{children:[e,t,n,o.jsx(U,{})]})}),o.jsx(l.Footer,{children:o.jsx(P,{})}),o.jsx(F,{})]})}I.createRoot(document.getElementById("graphiql")).render(o.jsx(c.StrictMode,{children:o.jsx(R,{})}));
