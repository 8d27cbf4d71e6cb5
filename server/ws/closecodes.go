package ws

// The close codes of every websocket the transport closes, whatever the
// reason: RFC 6455's, and those of graphql-transport-ws
// (github.com/enisdenjo/graphql-ws, PROTOCOL.md), which the legacy
// graphql-ws connections get too where the adapter, not gqlgen, closes
// them. A connection shut down with the server gets 1001 Going Away
// (websocket.CloseGoingAway), one whose message is too large 1009
// (gorilla's read limit).
const (
	// closeProtocolError is RFC 6455's 1002, which gqlgen uses for every
	// protocol violation it detects; graphql-transport-ws connections get
	// the protocol's codes instead (transportWS.translateClose).
	closeProtocolError = 1002
	// closeTryAgainLater is RFC 6455's 1013: a connection over one of the
	// connection caps. graphql-ws clients retry it with backoff.
	closeTryAgainLater = 1013

	closeBadRequest   = 4400 // an invalid message
	closeUnauthorized = 4401 // subscribe before connection_ack
	// closeForbidden is the graphql-transport-ws close code for a refused
	// connection_init ("4403: Forbidden" in the protocol), and for a
	// connection whose session ended.
	closeForbidden = 4403
	// closeSubprotocolNotAcceptable closes a connection that negotiated
	// neither graphql-transport-ws nor graphql-ws, as the graphql-ws
	// reference server does.
	closeSubprotocolNotAcceptable = 4406
	closeInitTimeout              = 4408 // no connection_init in time
	closeSubscriberTaken          = 4409 // subscribe with an id in use
	closeTooManyInits             = 4429 // a second connection_init
)
