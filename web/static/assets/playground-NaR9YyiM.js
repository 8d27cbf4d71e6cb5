import{g as S,c as C,w as A}from"./endpoint-DHTdaLEw.js";import{g as E,p as N,c as j,j as n,r as l,G as u,u as p,T as U}from"./vendor-Dv8STY8J.js";import"./runtime-Bpr93w1e.js";const F=new Set(["viewer","signUp","logIn","updateProfile","setPrivate","setAttributes"]);let h="";function P(e){h=e.toLowerCase()}const f=e=>e!==null&&typeof e=="object"&&!Array.isArray(e);function T(e){return typeof e.id!="string"?null:"latestAt"in e||"latestActors"in e?"groupId":"handle"in e?"userId":"text"in e||"likeCount"in e||"repostCount"in e||"replyCount"in e||"viewerHasLiked"in e?"messageId":null}function q(e){const t={labels:{}},o=(r,s)=>{if(Array.isArray(r))return r.forEach(d=>o(d,!1));if(!f(r))return;const a=T(r),i=a==="userId"&&(s||h!==""&&String(r.handle).toLowerCase()===h);a&&!t[a]&&!i&&(t[a]=r.id,t.labels[a]=a==="userId"?`@${String(r.handle)}`:typeof r.text=="string"?`“${r.text.slice(0,24)}”`:"");for(const d of Object.values(r))o(d,!1)};if(f(e))for(const[r,s]of Object.entries(e))o(s,F.has(r));return t}const w=new Set;function R(e){return w.add(e),()=>w.delete(e)}function y(e){const t=q(e);if(!(!t.userId&&!t.messageId&&!t.groupId))for(const o of w)o(t)}function H(e,t){let o;try{const s=e.trim()===""?{}:JSON.parse(e);if(!f(s))return;o=s}catch{return}let r=!1;for(const s of["userId","messageId","groupId"])t[s]&&o[s]!==t[s]&&(o[s]=t[s],r=!0);return r?JSON.stringify(o,null,2):e}const D=`# Herald's GraphQL playground: one named operation per
# step. Press the run button and pick one, or put the
# cursor in it and press Ctrl-Enter. Variables are in the
# Variables pane below; the Headers pane holds your token.
#
# Your handles end in a random suffix made for this
# browser (alice_x7k2, bob_x7k2), so two people trying the
# same server do not collide.
#
# Ids carry over: whenever a result shows a user, a
# message or a notification group, its id goes into
# "userId", "messageId" or "groupId" in the Variables
# pane (the first one of the result: the newest inbox
# item, the first search hit), as the line under the
# result says. So FindUser then Follow, Inbox then Like,
# or FollowRequests then ApproveFollow need no copying.
#
# 1. SignUp creates an account (LogIn signs in). Its token
#    goes into the Headers pane as an Authorization header,
#    sent with every request and in the websocket's
#    connection_init. The key button sets a token by hand.
#    CreateFriend makes a second account ("friendHandle")
#    to follow, without signing in as it.
#    UpdateProfile sets your name, bio, website and avatar
#    (a field left out stays; "" clears it).
# 2. FindUser looks someone up by handle ("followHandle");
#    their id lands in "userId". SearchUsers finds people
#    as you type: a prefix of a handle or of a word of a
#    name, most followed first. Relationship tells whether
#    you follow, have asked to follow, block or mute them.
# 3. Follow follows the user in "userId": their posts
#    reach your inbox. A private account gets a request.
# 4. Post writes a message to your followers' inboxes;
#    each @handle in it is a mention.
# 5. Inbox reads your home timeline, newest first, with
#    its counts; for the next page, pass its endCursor as
#    "after". MarkRead clears the unread count. Like likes
#    the message in "messageId", Unlike takes it back;
#    MyLikes lists what you like; Repost shares it with
#    your followers (their inboxes show it with
#    repostedBy), Unrepost takes it back; Thread shows its
#    replies and its thread's root.
#    Notifications reads who followed, liked, reposted,
#    replied to or mentioned you, grouped ("bob and 2 others liked your
#    post"); MarkNotificationsRead clears its unread count
#    (up to the group in "groupId" with MarkReadUpTo).
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
# 7. Block, Unblock, Mute and Unmute act on "userId";
#    BlockedAndMuted lists whom you block and mute.
#    SetPrivate ("private": true) makes your account
#    private: follows become requests. FollowRequests lists
#    them (the first one's id lands in "userId");
#    ApproveFollow or RejectFollow answers it.
# 8. ChangePassword ("oldPassword" to "newPassword") ends
#    your other sessions; ExportAccount returns all your
#    data as one JSON document; DeleteAccount ("password")
#    deletes your account for good.
# 9. LogOut ends the token in the Headers pane at once,
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

mutation CreateFriend($friendHandle: String!, $password: String!) {
  friend: signUp(input: {handle: $friendHandle, password: $password, displayName: "Bob"}) {
    user {
      id
      handle
      displayName
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

query Relationship($followHandle: String!) {
  user(handle: $followHandle) {
    id
    handle
    private
    viewerFollows
    viewerRequestedFollow
    viewerBlocks
    viewerMutes
  }
}

mutation Follow($userId: ID!) {
  follow(userId: $userId) {
    id
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

mutation MarkReadUpTo($groupId: ID) {
  markNotificationsRead(upTo: $groupId)
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

mutation Block($userId: ID!) {
  block(userId: $userId) {
    id
    handle
    viewerBlocks
    viewerFollows
  }
}

mutation Unblock($userId: ID!) {
  unblock(userId: $userId) {
    id
    handle
    viewerBlocks
  }
}

mutation Mute($userId: ID!) {
  mute(userId: $userId) {
    id
    handle
    viewerMutes
    viewerFollows
  }
}

mutation Unmute($userId: ID!) {
  unmute(userId: $userId) {
    id
    handle
    viewerMutes
  }
}

query BlockedAndMuted {
  viewer {
    blocked(first: 20) {
      totalCount
      edges {
        node {
          id
          handle
          displayName
        }
      }
    }
    muted(first: 20) {
      totalCount
      edges {
        node {
          id
          handle
          displayName
        }
      }
    }
  }
}

mutation SetPrivate($private: Boolean!) {
  setPrivate(private: $private) {
    handle
    private
  }
}

query FollowRequests {
  viewer {
    private
    followRequests(first: 20) {
      totalCount
      edges {
        node {
          id
          handle
          displayName
        }
      }
    }
  }
}

mutation ApproveFollow($userId: ID!) {
  approveFollow(userId: $userId) {
    id
    handle
    viewerFollows
  }
}

mutation RejectFollow($userId: ID!) {
  rejectFollow(userId: $userId) {
    id
    handle
  }
}

mutation ChangePassword($oldPassword: String!, $newPassword: String!) {
  changePassword(oldPassword: $oldPassword, newPassword: $newPassword)
}

query ExportAccount {
  exportAccount
}

mutation DeleteAccount($password: String!) {
  deleteAccount(password: $password)
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
`;function L(){const e="abcdefghijkmnpqrstuvwxyz23456789",t=crypto.getRandomValues(new Uint8Array(4));return Array.from(t,o=>e[o%e.length]).join("")}function O(e=L()){const t=`alice_${e}`,o=`bob_${e}`;return`{
  "handle": "${t}",
  "password": "correct horse",
  "displayName": "Alice",
  "friendHandle": "${o}",
  "bio": "Curious. Falls down rabbit holes.",
  "websiteUrl": "https://alice.example",
  "followHandle": "${o}",
  "search": "bob_",
  "userId": "run FindUser: the id lands here",
  "messageId": "run Post or Inbox: the id lands here",
  "groupId": null,
  "text": "Hello from the playground, @${o}!",
  "after": null,
  "private": true,
  "oldPassword": "correct horse",
  "newPassword": "correct horse battery staple"
}
`}function b(e){if(e.trim()==="")return{};try{const t=JSON.parse(e);return t!==null&&typeof t=="object"&&!Array.isArray(t)?t:void 0}catch{return}}function k(e){for(const[t,o]of Object.entries(e??{}))if(t.toLowerCase()==="authorization"&&o!=null)return String(o);return""}function M(e,t){const o=b(e);if(!o)return;const r={};for(const[s,a]of Object.entries(o))s.toLowerCase()!=="authorization"&&(r[s]=a);return t!==""&&(r.Authorization=`Bearer ${t}`),Object.keys(r).length===0?"":JSON.stringify(r,null,2)}function I(e){const t=/^Bearer\s+(\S+)$/i.exec(k(b(e)).trim());return t?t[1]:""}const g=new Set;function B(e){return g.add(e),()=>g.delete(e)}function V(e){for(const t of g)t(e)}let c;function J(e){if(c?.authorization===e)return c.client;c?.client.dispose();const t=C({url:A(),connectionParams:e?{authorization:e}:{},retryAttempts:0});return c={authorization:e,client:t},t}function _(e,t){try{return E(t??N(e.query),e.operationName??void 0)?.operation==="subscription"}catch{return!1}}function z(e){if(Array.isArray(e))return e;if(e&&typeof e=="object"&&"code"in e){const t=e;return{message:`websocket closed: ${t.code}${t.reason?` ${t.reason}`:""}`}}return e instanceof Error?{message:e.message}:{message:"websocket failed (is the server running?)"}}async function G(e,t){const o={"Content-Type":"application/json",Accept:"application/graphql-response+json, application/json"};for(const[x,m]of Object.entries(t))m!=null&&(o[x]=String(m));const r=await fetch(S(),{method:"POST",headers:o,body:JSON.stringify(e)}),s=await r.text();let a;try{a=JSON.parse(s)}catch{return{errors:[{message:`HTTP ${r.status}: ${s.trim()}`}]}}const i=a.data,d=i?.signUp??i?.logIn;return d&&typeof d.token=="string"&&(P(String(d.user?.handle??"")),V({token:d.token,handle:String(d.user?.handle??"")})),y(a.data),a}const Q=(e,t)=>{const o=t?.headers??{};if(!_(e,t?.documentAST))return G(e,o);const r=J(k(o));return{subscribe(s){return{unsubscribe:r.subscribe({query:e.query,operationName:e.operationName,variables:e.variables},{next:i=>{y(i.data),s.next(i)},error:i=>s.error(z(i)),complete:()=>s.complete()})}}}};function W(){return n.jsxs("svg",{className:"graphiql-toolbar-icon","aria-hidden":"true",viewBox:"0 0 24 24",fill:"none",stroke:"currentColor",strokeWidth:"1.5",children:[n.jsx("circle",{cx:"8",cy:"15",r:"4"}),n.jsx("path",{d:"M11 12l9-9M17 6l3 3M14 9l2 2"})]})}function v(){const e=p(t=>t.headerEditor);return t=>{if(!e)return;const o=M(e.getValue(),t);if(o===void 0){window.alert("The Headers pane must hold a JSON object (for example {}) before a token can be put in it.");return}e.setValue(o)}}function K(){const e=v();return l.useEffect(()=>B(({token:t})=>e(t))),null}function Y(){const e=p(r=>r.headerEditor),t=v(),o=()=>{const r=I(e?.getValue()??""),s=window.prompt("Bearer token for HTTP requests and the websocket (empty to remove):",r);s!==null&&t(s.trim().replace(/^Bearer\s+/i,""))};return n.jsx(U,{label:"Set or clear the bearer token",onClick:o,"data-testid":"token-button",children:n.jsx(W,{})})}function X(){const e=p(s=>s.headerEditor),[t,o]=l.useState("");l.useEffect(()=>{if(!e)return;o(e.getValue());const s=e.onDidChangeModelContent(()=>o(e.getValue()));return()=>s.dispose()},[e]);const r=I(t);return n.jsx("p",{className:"herald-token-status","data-testid":"token-status",role:"status",children:r?`Signed in: requests and subscriptions carry the token …${r.slice(-8)} from the Headers pane.`:"No token: run SignUp or LogIn, or press the key button, to act as a user."})}function Z(){const e=p(s=>s.variableEditor),[t,o]=l.useState(null);if(l.useEffect(()=>R(s=>{if(!e)return;const a=e.getValue(),i=H(a,s);i!==void 0&&i!==a&&e.setValue(i),o(d=>({...d,...s,labels:{...d?.labels,...s.labels}}))}),[e]),!t)return null;const r=["userId","messageId","groupId"].filter(s=>t[s]).map(s=>`${s} ← ${t.labels[s]||"…"+t[s].slice(-6)}`);return n.jsxs("p",{className:"herald-token-status","data-testid":"carried-ids",role:"status",children:["Carried into Variables: ",r.join(", ")]})}const $=e=>localStorage.getItem(`graphiql:${e}`),ee=$("variables")??O();function te(){return n.jsxs(u,{fetcher:Q,initialQuery:$("query")??D,initialVariables:ee,defaultEditorToolsVisibility:"variables",children:[n.jsx(u.Logo,{children:"Herald"}),n.jsx(u.Toolbar,{children:({prettify:e,merge:t,copy:o})=>n.jsxs(n.Fragment,{children:[e,t,o,n.jsx(Y,{})]})}),n.jsxs(u.Footer,{children:[n.jsx(X,{}),n.jsx(Z,{})]}),n.jsx(K,{})]})}j.createRoot(document.getElementById("graphiql")).render(n.jsx(l.StrictMode,{children:n.jsx(te,{})}));
