package store

import (
	"errors"
	"fmt"
)

// Error codes. They double as the GraphQL `extensions.code` values clients see.
const (
	ENOTFOUND        = "NOT_FOUND"
	EINVALID         = "BAD_USER_INPUT"
	ECONFLICT        = "CONFLICT"
	EUNAUTHENTICATED = "UNAUTHENTICATED"
	EFORBIDDEN       = "FORBIDDEN"
	EINTERNAL        = "INTERNAL"
	// ESTORAGEFULL: the server's storage is out of space, so writes are
	// refused until space is freed; reads still work. Nothing is lost: a
	// write refused this way did not happen.
	ESTORAGEFULL = "STORAGE_FULL"
	// ERESUMEEXPIRED: a subscription's `after` cursor names an event the
	// server no longer keeps (too old, evicted, from before a restart, or
	// not the viewer's), so it cannot prove it would replay every event
	// since. The client reads the inbox again, then subscribes without it.
	ERESUMEEXPIRED = "RESUME_EXPIRED"
	// ERATELIMITED: the server refuses the write for now and the client
	// should retry later (the GraphQL error's extensions.retryAfter says
	// when, in seconds). Nothing was written.
	ERATELIMITED = "RATE_LIMITED"
)

// Error is the one error type the domain reports to clients. Message is safe to
// show to an API client; any error that is not an *Error counts as INTERNAL and
// its text is only logged.
type Error struct {
	Code    string
	Message string
}

// Error implements the error interface. It is meant for logs.
func (e *Error) Error() string {
	return fmt.Sprintf("herald error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the *Error inside err, "" for nil, and
// EINTERNAL for any other error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of the *Error inside err, or
// "internal error" for any other error.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
