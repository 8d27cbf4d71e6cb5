import{g as S,c as E,w as M}from"./endpoint-DHTdaLEw.js";import{g as A,p as D,c as N,j as r,r as l,G as u,u as p,T}from"./vendor-Dv8STY8J.js";import"./runtime-Bpr93w1e.js";const w=["userId","messageId","groupId","conversationId","conversationMessageId"],F=new Set(["viewer","signUp","logIn","updateProfile","setPrivate","setAttributes"]);let h="";function q(e){h=e.toLowerCase()}const g=e=>e!==null&&typeof e=="object"&&!Array.isArray(e);function R(e){return typeof e.id!="string"?null:"latestAt"in e||"latestActors"in e?"groupId":"seq"in e||"conversationId"in e?"conversationMessageId":"isGroup"in e||"memberCount"in e||"peer"in e||"lastMessage"in e?"conversationId":"handle"in e?"userId":"text"in e||"likeCount"in e||"repostCount"in e||"replyCount"in e||"viewerHasLiked"in e?"messageId":null}function j(e){const t={labels:{}},s=(n,o)=>{if(Array.isArray(n))return n.forEach(d=>s(d,!1));if(!g(n))return;const a=R(n),i=a==="userId"&&(o||h!==""&&String(n.handle).toLowerCase()===h);a&&!t[a]&&!i&&(t[a]=n.id,t.labels[a]=a==="userId"?`@${String(n.handle)}`:typeof n.text=="string"?`“${n.text.slice(0,24)}”`:""),a==="conversationMessageId"&&typeof n.conversationId=="string"&&!t.conversationId&&(t.conversationId=n.conversationId);for(const d of Object.values(n))s(d,!1)};if(g(e))for(const[n,o]of Object.entries(e))s(o,F.has(n));return t}const m=new Set;function P(e){return m.add(e),()=>m.delete(e)}function v(e){const t=j(e);if(w.some(s=>t[s]))for(const s of m)s(t)}function U(e,t){let s;try{const o=e.trim()===""?{}:JSON.parse(e);if(!g(o))return;s=o}catch{return}let n=!1;for(const o of w)t[o]&&s[o]!==t[o]&&(s[o]=t[o],n=!0);return n?JSON.stringify(s,null,2):e}const O=`# Herald's GraphQL playground: one named operation per
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
# 10. Direct and group messages: SendDirectMessage sends
#    "dmText" to the user in "userId" (run CreateFriend then
#    FindUser first); its conversation's id lands in
#    "conversationId" and the message's in
#    "conversationMessageId". Conversations lists yours,
#    most recently active first, with their last message
#    and unread count; Conversation reads one's messages
#    and read receipts. CreateGroup makes a group named
#    "groupName" with the user in "userId";
#    SendGroupMessage writes to the conversation in
#    "conversationId", MarkConversationRead reads it,
#    EditConversationMessage and DeleteConversationMessage
#    change your message in "conversationMessageId".
#    SetMessagesFrom ("messagesFrom": EVERYONE, FOLLOWING
#    or NOBODY) says who may message you.
#    ConversationEvents shows each change live: MESSAGE,
#    EDITED, DELETED, READ, MEMBER_ADDED, MEMBER_REMOVED.

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

mutation SendDirectMessage($userId: ID!, $dmText: String!) {
  sendDirectMessage(to: $userId, text: $dmText) {
    id
    conversationId
    seq
    text
    createdAt
  }
}

query Conversations {
  conversations(first: 20) {
    edges {
      cursor
      node {
        id
        isGroup
        name
        memberCount
        peer {
          handle
        }
        unreadCount
        lastMessage {
          id
          seq
          text
          author {
            handle
          }
        }
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
  conversationsUnreadCount
}

query Conversation($conversationId: ID!) {
  conversation(id: $conversationId) {
    id
    name
    members {
      handle
    }
    readPositions {
      member {
        handle
      }
      seq
    }
    messages(first: 20) {
      edges {
        cursor
        node {
          id
          seq
          text
          deleted
          editedAt
          author {
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
}

mutation CreateGroup($groupName: String!, $userId: ID!) {
  createGroup(name: $groupName, memberIds: [$userId]) {
    id
    name
    memberCount
    admins {
      handle
    }
  }
}

mutation SendGroupMessage($conversationId: ID!, $dmText: String!) {
  sendGroupMessage(conversationId: $conversationId, text: $dmText) {
    id
    conversationId
    seq
    text
  }
}

mutation MarkConversationRead($conversationId: ID!) {
  markConversationRead(id: $conversationId) {
    id
    unreadCount
    readPositions {
      member {
        handle
      }
      seq
    }
  }
}

mutation EditConversationMessage($conversationMessageId: ID!, $dmText: String!) {
  editConversationMessage(id: $conversationMessageId, text: $dmText) {
    id
    conversationId
    text
    editedAt
  }
}

mutation DeleteConversationMessage($conversationMessageId: ID!) {
  deleteConversationMessage(id: $conversationMessageId)
}

mutation SetMessagesFrom($messagesFrom: MessagePolicy!) {
  setMessagesFrom(policy: $messagesFrom) {
    handle
    messagesFrom
  }
}

subscription ConversationEvents($after: String) {
  conversationEvents(after: $after) {
    type
    cursor
    conversationId
    unreadCount
    edge {
      cursor
      node {
        id
        seq
        text
        author {
          handle
        }
      }
    }
    message {
      id
      text
      editedAt
    }
    deletedMessageId
    member {
      handle
    }
    readSeq
    conversation {
      id
      memberCount
    }
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
`;function L(){const e="abcdefghijkmnpqrstuvwxyz23456789",t=crypto.getRandomValues(new Uint8Array(4));return Array.from(t,s=>e[s%e.length]).join("")}function H(e=L()){const t=`alice_${e}`,s=`bob_${e}`;return`{
  "handle": "${t}",
  "password": "correct horse",
  "displayName": "Alice",
  "friendHandle": "${s}",
  "bio": "Curious. Falls down rabbit holes.",
  "websiteUrl": "https://alice.example",
  "followHandle": "${s}",
  "search": "bob_",
  "userId": "run FindUser: the id lands here",
  "messageId": "run Post or Inbox: the id lands here",
  "groupId": null,
  "text": "Hello from the playground, @${s}!",
  "after": null,
  "private": true,
  "conversationId": null,
  "conversationMessageId": null,
  "dmText": "Tea at five?",
  "groupName": "Tea party",
  "messagesFrom": "EVERYONE",
  "oldPassword": "correct horse",
  "newPassword": "correct horse battery staple"
}
`}function y(e){if(e.trim()==="")return{};try{const t=JSON.parse(e);return t!==null&&typeof t=="object"&&!Array.isArray(t)?t:void 0}catch{return}}function b(e){for(const[t,s]of Object.entries(e??{}))if(t.toLowerCase()==="authorization"&&s!=null)return String(s);return""}function B(e,t){const s=y(e);if(!s)return;const n={};for(const[o,a]of Object.entries(s))o.toLowerCase()!=="authorization"&&(n[o]=a);return t!==""&&(n.Authorization=`Bearer ${t}`),Object.keys(n).length===0?"":JSON.stringify(n,null,2)}function k(e){const t=/^Bearer\s+(\S+)$/i.exec(b(y(e)).trim());return t?t[1]:""}const f=new Set;function V(e){return f.add(e),()=>f.delete(e)}function G(e){for(const t of f)t(e)}let c;function _(e){if(c?.authorization===e)return c.client;c?.client.dispose();const t=E({url:M(),connectionParams:e?{authorization:e}:{},retryAttempts:0});return c={authorization:e,client:t},t}function J(e,t){try{return A(t??D(e.query),e.operationName??void 0)?.operation==="subscription"}catch{return!1}}function Y(e){if(Array.isArray(e))return e;if(e&&typeof e=="object"&&"code"in e){const t=e;return{message:`websocket closed: ${t.code}${t.reason?` ${t.reason}`:""}`}}return e instanceof Error?{message:e.message}:{message:"websocket failed (is the server running?)"}}async function z(e,t){const s={"Content-Type":"application/json",Accept:"application/graphql-response+json, application/json"};for(const[C,I]of Object.entries(t))I!=null&&(s[C]=String(I));const n=await fetch(S(),{method:"POST",headers:s,body:JSON.stringify(e)}),o=await n.text();let a;try{a=JSON.parse(o)}catch{return{errors:[{message:`HTTP ${n.status}: ${o.trim()}`}]}}const i=a.data,d=i?.signUp??i?.logIn;return d&&typeof d.token=="string"&&(q(String(d.user?.handle??"")),G({token:d.token,handle:String(d.user?.handle??"")})),v(a.data),a}const Q=(e,t)=>{const s=t?.headers??{};if(!J(e,t?.documentAST))return z(e,s);const n=_(b(s));return{subscribe(o){return{unsubscribe:n.subscribe({query:e.query,operationName:e.operationName,variables:e.variables},{next:i=>{v(i.data),o.next(i)},error:i=>o.error(Y(i)),complete:()=>o.complete()})}}}};function W(){return r.jsxs("svg",{className:"graphiql-toolbar-icon","aria-hidden":"true",viewBox:"0 0 24 24",fill:"none",stroke:"currentColor",strokeWidth:"1.5",children:[r.jsx("circle",{cx:"8",cy:"15",r:"4"}),r.jsx("path",{d:"M11 12l9-9M17 6l3 3M14 9l2 2"})]})}function $(){const e=p(t=>t.headerEditor);return t=>{if(!e)return;const s=B(e.getValue(),t);if(s===void 0){window.alert("The Headers pane must hold a JSON object (for example {}) before a token can be put in it.");return}e.setValue(s)}}function K(){const e=$();return l.useEffect(()=>V(({token:t})=>e(t))),null}function X(){const e=p(n=>n.headerEditor),t=$(),s=()=>{const n=k(e?.getValue()??""),o=window.prompt("Bearer token for HTTP requests and the websocket (empty to remove):",n);o!==null&&t(o.trim().replace(/^Bearer\s+/i,""))};return r.jsx(T,{label:"Set or clear the bearer token",onClick:s,"data-testid":"token-button",children:r.jsx(W,{})})}function Z(){const e=p(o=>o.headerEditor),[t,s]=l.useState("");l.useEffect(()=>{if(!e)return;s(e.getValue());const o=e.onDidChangeModelContent(()=>s(e.getValue()));return()=>o.dispose()},[e]);const n=k(t);return r.jsx("p",{className:"herald-token-status","data-testid":"token-status",role:"status",children:n?`Signed in: requests and subscriptions carry the token …${n.slice(-8)} from the Headers pane.`:"No token: run SignUp or LogIn, or press the key button, to act as a user."})}function ee(){const e=p(o=>o.variableEditor),[t,s]=l.useState(null);if(l.useEffect(()=>P(o=>{if(!e)return;const a=e.getValue(),i=U(a,o);i!==void 0&&i!==a&&e.setValue(i),s(d=>({...d,...o,labels:{...d?.labels,...o.labels}}))}),[e]),!t)return null;const n=w.filter(o=>t[o]).map(o=>`${o} ← ${t.labels[o]||"…"+t[o].slice(-6)}`);return r.jsxs("p",{className:"herald-token-status","data-testid":"carried-ids",role:"status",children:["Carried into Variables: ",n.join(", ")]})}const x=e=>localStorage.getItem(`graphiql:${e}`),te=x("variables")??H();function se(){return r.jsxs(u,{fetcher:Q,initialQuery:x("query")??O,initialVariables:te,defaultEditorToolsVisibility:"variables",children:[r.jsx(u.Logo,{children:"Herald"}),r.jsx(u.Toolbar,{children:({prettify:e,merge:t,copy:s})=>r.jsxs(r.Fragment,{children:[e,t,s,r.jsx(X,{})]})}),r.jsxs(u.Footer,{children:[r.jsx(Z,{}),r.jsx(ee,{})]}),r.jsx(K,{})]})}N.createRoot(document.getElementById("graphiql")).render(r.jsx(l.StrictMode,{children:r.jsx(se,{})}));
