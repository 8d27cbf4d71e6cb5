package ws

import "time"

// What the tests of package ws_test name of the transport.
const (
	SubprotocolTransportWS = subprotocolTransportWS
	SubprotocolGraphQLWS   = subprotocolGraphQLWS

	CloseForbidden                = closeForbidden
	CloseSubprotocolNotAcceptable = closeSubprotocolNotAcceptable
	CloseTryAgainLater            = closeTryAgainLater

	RefusedSubprotocol   = refusedSubprotocol
	RefusedTotal         = refusedTotal
	RefusedAddress       = refusedAddress
	RefusedUser          = refusedUser
	RefusedSubscriptions = refusedSubscriptions
	RefusedTokenExpired  = refusedTokenExpired
	RefusedTokenRevoked  = refusedTokenRevoked
)

// SetInitTimeout sets how long a graphql-transport-ws client has to send
// connection_init, for the connections accepted from now on.
func (a *Adapter) SetInitTimeout(d time.Duration) { a.initTimeout = d }

// SetPingInterval sets the keep-alive interval of the graphql-transport-ws
// connections accepted from now on.
func (a *Adapter) SetPingInterval(d time.Duration) { a.pingInterval = d }

// SetSweepEvery sets how often every open connection's session is checked
// again; call it before any connection has a session.
func (a *Adapter) SetSweepEvery(d time.Duration) { a.sweepEvery = d }

// SetKeepAlive sets the keep-alive interval of the graphql-ws connections
// accepted from now on.
func (a *Adapter) SetKeepAlive(d time.Duration) { a.keepAlive = d }
