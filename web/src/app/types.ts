export interface UserRef {
  id: string;
  handle: string;
  displayName: string;
  avatarUrl: string | null;
}

export interface User extends UserRef {
  bio: string | null;
  websiteUrl: string | null;
  createdAt: string;
  followerCount: number;
  followingCount: number;
  messageCount: number;
  viewerFollows: boolean;
}

// What the new API adds to a user: read apart, so that a server without
// it still shows the rest.
export interface UserExtras {
  id: string;
  private: boolean;
  viewerRequestedFollow: boolean;
  viewerBlocks: boolean;
  viewerMutes: boolean;
}

export interface Message {
  id: string;
  text: string;
  kind: 'POST' | 'REPLY' | 'REPOST';
  createdAt: string;
  editedAt: string | null;
  author: UserRef;
  replyTo: { id: string; text: string; author: { handle: string } } | null;
  mentions: { handle: string }[];
  likeCount: number;
  viewerHasLiked: boolean;
  repostCount: number;
  viewerHasReposted: boolean;
  replyCount: number;
}

export interface Edge {
  cursor: string;
  deliveredAt: string;
  repostedBy: { id: string; handle: string } | null;
  node: Message;
}

export interface InboxPage {
  totalCount: number;
  unreadCount: number;
  rebuilding: boolean;
  edges: Edge[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

export interface InboxEvent {
  type: string;
  cursor: string;
  unreadCount: number;
  totalCount: number;
  edge: Edge | null;
  message: Message | null;
  deletedMessageId: string | null;
  removedMessageId: string | null;
}

export interface NotificationGroup {
  id: string;
  kind: string;
  count: number;
  latestActors: UserRef[];
  message: { id: string; text: string } | null;
  latestAt: string;
  unread: boolean;
}

export interface NotificationEvent {
  type: string;
  cursor: string;
  unreadCount: number;
  totalCount: number;
  edge: { cursor: string; node: NotificationGroup } | null;
}

export interface Connection<T> {
  totalCount: number;
  edges: { cursor: string; node: T }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

export interface ConvMessage {
  id: string;
  conversationId: string;
  seq: number;
  author: UserRef | null;
  text: string;
  createdAt: string;
  editedAt: string | null;
  deleted: boolean;
}

export interface ConvSummary {
  id: string;
  isGroup: boolean;
  name: string | null;
  memberCount: number;
  peer: UserRef | null;
  unreadCount: number;
  lastMessage: ConvMessage | null;
}

export interface ConvFull extends ConvSummary {
  members: UserRef[];
  admins: { id: string }[];
  readPositions: { member: { id: string }; seq: number }[];
}

export interface ConversationEvent {
  type: string;
  conversationId: string;
  unreadCount: number;
  cursor: string;
  edge: { cursor: string; node: ConvMessage } | null;
  message: ConvMessage | null;
  deletedMessageId: string | null;
  member: UserRef | null;
  readSeq: number | null;
  conversation: ConvFull | null;
}
