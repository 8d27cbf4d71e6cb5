package store

import "time"

// FollowRequest is a user's request to follow a private account
// (User.Private), waiting for the account's answer. Its ID is made at
// CreatedAt and orders the account's list of requests, oldest first.
type FollowRequest struct {
	ID        ID
	UserID    ID // who asks
	TargetID  ID // the private account
	CreatedAt time.Time
}
