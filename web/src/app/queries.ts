// The operations the client sends, with the fragments they share.

export const USER_REF = 'id handle displayName avatarUrl';
export const USER = `${USER_REF} bio websiteUrl createdAt followerCount followingCount messageCount viewerFollows`;
// Fields of the new API (blocks, mutes, private accounts), asked apart.
export const EXTRAS = 'id private viewerRequestedFollow viewerBlocks viewerMutes';

export const MESSAGE = `fragment Msg on Message {
  id text kind createdAt editedAt
  author { ${USER_REF} }
  replyTo { id text author { handle } }
  mentions { handle }
  likeCount viewerHasLiked repostCount viewerHasReposted replyCount
}`;

const EDGE = 'cursor deliveredAt repostedBy { id handle } node { ...Msg }';

export const INBOX = `query Inbox($first: Int!, $after: String) {
  inbox(first: $first, after: $after) {
    totalCount unreadCount rebuilding
    edges { ${EDGE} }
    pageInfo { hasNextPage endCursor }
  }
}
${MESSAGE}`;

export const INBOX_EVENTS = `subscription InboxEvents($after: String) {
  inboxEvents(after: $after) {
    type unreadCount totalCount cursor
    edge { ${EDGE} }
    message { ...Msg }
    deletedMessageId removedMessageId
  }
}
${MESSAGE}`;

const GROUP = `id kind count latestActors { ${USER_REF} } message { id text } latestAt unread`;

export const NOTIFICATIONS = `query Notifications($first: Int!, $after: String) {
  notifications(first: $first, after: $after) { totalCount unreadCount edges { cursor node { ${GROUP} } } pageInfo { hasNextPage endCursor } }
}`;

export const NOTIFICATION_EVENTS = `subscription NotificationEvents($after: String) {
  notificationEvents(after: $after) { type cursor unreadCount totalCount edge { cursor node { ${GROUP} } } }
}`;

export const PROFILE = `query Profile($h: String!) { user(handle: $h) { ${USER} } }`;

export const PROFILE_MESSAGES = `query ProfileMessages($h: String!, $after: String) {
  user(handle: $h) {
    id
    messages(first: 20, after: $after) {
      edges { cursor node { ...Msg repostOf { ...Msg } } }
      pageInfo { hasNextPage endCursor }
    }
  }
}
${MESSAGE}`;

export const msgMutation = (field: string): string => `mutation($id: ID!) { ${field}(messageId: $id) { ...Msg } } ${MESSAGE}`;
export const userMutation = (field: string): string => `mutation($id: ID!) { ${field}(userId: $id) { ${USER} } }`;

// ---- conversations (direct messages and groups) ----

export const CONV_MESSAGE = `id conversationId seq author { ${USER_REF} } text createdAt editedAt deleted`;
// What a row of the conversation list shows: peer or name, last message, unread.
export const CONV_SUMMARY = `id isGroup name memberCount peer { ${USER_REF} } unreadCount lastMessage { ${CONV_MESSAGE} }`;
// What the open conversation needs besides its messages.
export const CONV_FULL = `${CONV_SUMMARY} members { ${USER_REF} } admins { id } readPositions { member { id } seq }`;

export const CONVERSATIONS = `query Conversations($after: String) {
  conversations(first: 20, after: $after) { edges { cursor node { ${CONV_SUMMARY} } } pageInfo { hasNextPage endCursor } }
  conversationsUnreadCount
}`;

export const CONVERSATION = `query Conversation($id: ID!, $after: String) {
  conversation(id: $id) {
    ${CONV_FULL}
    messages(first: 30, after: $after) { edges { cursor node { ${CONV_MESSAGE} } } pageInfo { hasNextPage endCursor } }
  }
}`;

// An older page alone: the members, admins and read positions, which the
// open conversation has, would cost as the largest group again (about
// 2,300 of the query cost's points, against some 300 for the page).
export const CONVERSATION_OLDER = `query ConversationOlder($id: ID!, $after: String) {
  conversation(id: $id) {
    id
    messages(first: 30, after: $after) { edges { cursor node { ${CONV_MESSAGE} } } pageInfo { hasNextPage endCursor } }
  }
}`;

export const CONVERSATION_EVENTS = `subscription ConversationEvents($after: String) {
  conversationEvents(after: $after) {
    type conversationId unreadCount cursor
    edge { cursor node { ${CONV_MESSAGE} } }
    message { ${CONV_MESSAGE} }
    deletedMessageId
    member { ${USER_REF} }
    readSeq
    conversation { ${CONV_FULL} }
  }
}`;
