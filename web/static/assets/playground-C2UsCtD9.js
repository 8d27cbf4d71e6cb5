import{g as x,c as v,w as I}from"./endpoint-DHTdaLEw.js";import{g as $,p as S,c as C,j as s,r as c,G as l,u as h,T as E}from"./vendor-Dv8STY8J.js";import"./runtime-Bpr93w1e.js";const N=`# Herald's GraphQL playground: one named operation per
# step. Press the run button and pick one, or put the
# cursor in it and press Ctrl-Enter. Variables are in the
# Variables pane below; the Headers pane holds your token.
#
# 1. SignUp creates an account (LogIn signs in). Its token
#    goes into the Headers pane as an Authorization header,
#    sent with every request and in the websocket's
#    connection_init. The key button sets a token by hand.
#    UpdateProfile sets your name, bio, website and avatar
#    (a field left out stays; "" clears it).
# 2. FindUser looks someone up by handle: copy their id
#    into "userId" in the Variables pane.
#    SearchUsers finds people as you type: a prefix of a
#    handle or of a word of a name, most followed first.
# 3. Follow follows them: their posts reach your inbox.
# 4. Post writes a message to your followers' inboxes;
#    each @handle in it is a mention.
# 5. Inbox reads your home timeline, newest first, with
#    its counts; for the next page, pass its endCursor as
#    "after". MarkRead clears the unread count. Like likes
#    the message in "messageId" (copy one from the inbox),
#    Unlike takes it back; MyLikes lists what you like;
#    Repost shares it with your followers (their inboxes
#    show it with repostedBy), Unrepost takes it back;
#    Thread shows its replies and its thread's root.
#    Notifications reads who followed, liked, reposted,
#    replied to or mentioned you, grouped ("bob and 2 others liked your
#    post"); MarkNotificationsRead clears its unread count.
# 6. InboxEvents keeps a websocket open and shows each
#    change to your inbox as it happens, until you press
#    stop: ADDED (edge), EDITED (message), DELETED
#    (deletedMessageId), REMOVED (removedMessageId: you
#    unfollowed its author, or its repost was taken
#    back), READ. To resume after a
#    dropped connection, pass the last event's cursor as
#    "after": you get what you missed, then live events.
#    NotificationEvents does the same for your
#    notifications: ADDED (a group, new or moved to the
#    top), READ.
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

mutation UpdateProfile($displayName: String, $bio: String, $websiteUrl: String) {
  updateProfile(input: {displayName: $displayName, bio: $bio, websiteUrl: $websiteUrl}) {
    handle
    displayName
    bio
    websiteUrl
    avatarUrl
  }
}

query FindUser($followHandle: String!) {
  user(handle: $followHandle) {
    id
    handle
    displayName
    bio
    websiteUrl
    followerCount
    viewerFollows
  }
}

query SearchUsers($search: String!) {
  searchUsers(query: $search, first: 10) {
    totalCount
    edges {
      cursor
      node {
        id
        handle
        displayName
        followerCount
        viewerFollows
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
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
      repostedBy {
        handle
      }
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
        repostCount
        viewerHasReposted
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

query Notifications {
  notifications(first: 20) {
    totalCount
    unreadCount
    edges {
      cursor
      node {
        id
        kind
        count
        latestActors {
          handle
        }
        message {
          id
          text
        }
        latestAt
        unread
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}

mutation MarkNotificationsRead {
  markNotificationsRead
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

mutation Repost($messageId: ID!) {
  repost(messageId: $messageId) {
    id
    repostCount
    viewerHasReposted
  }
}

mutation Unrepost($messageId: ID!) {
  unrepost(messageId: $messageId) {
    id
    repostCount
    viewerHasReposted
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
      repostedBy {
        handle
      }
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

subscription NotificationEvents($after: String) {
  notificationEvents(after: $after) {
    type
    cursor
    unreadCount
    totalCount
    edge {
      cursor
      node {
        id
        kind
        count
        latestActors {
          handle
        }
        message {
          id
          text
        }
        latestAt
        unread
      }
    }
  }
}
`,T=`{
  "handle": "alice",
  "password": "correct horse",
  "displayName": "Alice",
  "bio": "Curious. Falls down rabbit holes.",
  "websiteUrl": "https://alice.example",
  "followHandle": "bob",
  "search": "bo",
  "userId": "paste the id FindUser returned",
  "messageId": "paste a message id from Inbox",
  "text": "Hello from the playground, @bob!",
  "after": null
}
`;function m(e){if(e.trim()==="")return{};try{const t=JSON.parse(e);return t!==null&&typeof t=="object"&&!Array.isArray(t)?t:void 0}catch{return}}function b(e){for(const[t,o]of Object.entries(e??{}))if(t.toLowerCase()==="authorization"&&o!=null)return String(o);return""}function j(e,t){const o=m(e);if(!o)return;const n={};for(const[r,a]of Object.entries(o))r.toLowerCase()!=="authorization"&&(n[r]=a);return t!==""&&(n.Authorization=`Bearer ${t}`),Object.keys(n).length===0?"":JSON.stringify(n,null,2)}function y(e){const t=/^Bearer\s+(\S+)$/i.exec(b(m(e)).trim());return t?t[1]:""}const p=new Set;function A(e){return p.add(e),()=>p.delete(e)}function U(e){for(const t of p)t(e)}let u;function L(e){if(u?.authorization===e)return u.client;u?.client.dispose();const t=v({url:I(),connectionParams:e?{authorization:e}:{},retryAttempts:0});return u={authorization:e,client:t},t}function O(e,t){try{return $(t??S(e.query),e.operationName??void 0)?.operation==="subscription"}catch{return!1}}function D(e){if(Array.isArray(e))return e;if(e&&typeof e=="object"&&"code"in e){const t=e;return{message:`websocket closed: ${t.code}${t.reason?` ${t.reason}`:""}`}}return e instanceof Error?{message:e.message}:{message:"websocket failed (is the server running?)"}}async function H(e,t){const o={"Content-Type":"application/json",Accept:"application/graphql-response+json, application/json"};for(const[k,f]of Object.entries(t))f!=null&&(o[k]=String(f));const n=await fetch(x(),{method:"POST",headers:o,body:JSON.stringify(e)}),r=await n.text();let a;try{a=JSON.parse(r)}catch{return{errors:[{message:`HTTP ${n.status}: ${r.trim()}`}]}}const i=a.data,d=i?.signUp??i?.logIn;return d&&typeof d.token=="string"&&U({token:d.token,handle:String(d.user?.handle??"")}),a}const q=(e,t)=>{const o=t?.headers??{};if(!O(e,t?.documentAST))return H(e,o);const n=L(b(o));return{subscribe(r){return{unsubscribe:n.subscribe({query:e.query,operationName:e.operationName,variables:e.variables},{next:i=>r.next(i),error:i=>r.error(D(i)),complete:()=>r.complete()})}}}};function M(){return s.jsxs("svg",{className:"graphiql-toolbar-icon","aria-hidden":"true",viewBox:"0 0 24 24",fill:"none",stroke:"currentColor",strokeWidth:"1.5",children:[s.jsx("circle",{cx:"8",cy:"15",r:"4"}),s.jsx("path",{d:"M11 12l9-9M17 6l3 3M14 9l2 2"})]})}function w(){const e=h(t=>t.headerEditor);return t=>{if(!e)return;const o=j(e.getValue(),t);if(o===void 0){window.alert("The Headers pane must hold a JSON object (for example {}) before a token can be put in it.");return}e.setValue(o)}}function R(){const e=w();return c.useEffect(()=>A(({token:t})=>e(t))),null}function P(){const e=h(n=>n.headerEditor),t=w(),o=()=>{const n=y(e?.getValue()??""),r=window.prompt("Bearer token for HTTP requests and the websocket (empty to remove):",n);r!==null&&t(r.trim().replace(/^Bearer\s+/i,""))};return s.jsx(E,{label:"Set or clear the bearer token",onClick:o,"data-testid":"token-button",children:s.jsx(M,{})})}function B(){const e=h(r=>r.headerEditor),[t,o]=c.useState("");c.useEffect(()=>{if(!e)return;o(e.getValue());const r=e.onDidChangeModelContent(()=>o(e.getValue()));return()=>r.dispose()},[e]);const n=y(t);return s.jsx("p",{className:"herald-token-status","data-testid":"token-status",role:"status",children:n?`Signed in: requests and subscriptions carry the token …${n.slice(-8)} from the Headers pane.`:"No token: run SignUp or LogIn, or press the key button, to act as a user."})}const g=e=>localStorage.getItem(`graphiql:${e}`);function F(){return s.jsxs(l,{fetcher:q,initialQuery:g("query")??N,initialVariables:g("variables")??T,defaultEditorToolsVisibility:"variables",children:[s.jsx(l.Logo,{children:"Herald"}),s.jsx(l.Toolbar,{children:({prettify:e,merge:t,copy:o})=>s.jsxs(s.Fragment,{children:[e,t,o,s.jsx(P,{})]})}),s.jsx(l.Footer,{children:s.jsx(B,{})}),s.jsx(R,{})]})}C.createRoot(document.getElementById("graphiql")).render(s.jsx(c.StrictMode,{children:s.jsx(F,{})}));
