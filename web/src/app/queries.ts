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
