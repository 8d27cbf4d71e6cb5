// The playground opens on one document that walks through the API, one
// named operation per step; the run button asks which one to run.

export const exampleOperations = `# Herald's GraphQL playground: one named operation per
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
`;

export const exampleVariables = `{
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
`;
