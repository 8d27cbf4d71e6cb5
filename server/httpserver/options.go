package httpserver

import (
	"net/netip"
	"time"

	"herald/graph"
	"herald/server/ws"
)

// The default mutation rate limits. A person posting, following and
// replying by hand stays far below 60 a minute; the burst of 20 lets an app
// follow a handful of suggested users at once. An address may hold many
// users (a household, an office, a mobile carrier's NAT), so it gets five
// times as much; it is also what bounds signUp and logIn, where its 60 in a
// burst and 5 a second cap password guessing and the bcrypt work an
// attacker can cause from one address.
var (
	defaultUserRate    = graph.Rate{Count: 60, Per: time.Minute, Burst: 20}
	defaultAddressRate = graph.Rate{Count: 300, Per: time.Minute, Burst: 60}
	// Query cost is charged in complexity points. A page of 50 timeline
	// items with their authors costs about 1,150, so a user may read
	// about a page a second for good, and the burst covers the costliest
	// operation the complexity limit allows, three times over; an address
	// again gets five times a user's.
	defaultQueryUserRate    = graph.Rate{Count: 60_000, Per: time.Minute, Burst: 15_000}
	defaultQueryAddressRate = graph.Rate{Count: 300_000, Per: time.Minute, Burst: 75_000}
	// Failed logIns per handle, from any address: a person who forgot
	// their password gets ten tries at once, then one every 12 s; a
	// guesser spread over many addresses, 7,200 a day at most.
	defaultLogInRate = graph.Rate{Count: 5, Per: time.Minute, Burst: 10}
	// Account exports per user: two at once, then one every 15 minutes.
	defaultExportRate = graph.Rate{Count: 4, Per: time.Hour, Burst: 2}
)

// Options are the HTTP server's settings, which the server's flags of the
// same names set: who may call it, the limits on bodies, operations and
// websockets, the rate limits and the timeouts.
type Options struct {
	AllowedOrigins  []string
	MaxBodyBytes    int64
	Introspection   bool
	ComplexityLimit int
	MaxDepth        int
	// MaxBatch is the most operations in one batched POST; 0 or 1: no
	// batching.
	MaxBatch int
	// Websocket caps (ws.Limits); 0 is no limit.
	MaxSubscriptionsPerConnection int
	MaxWebsocketsPerUser          int
	MaxWebsocketsPerAddress       int
	MaxWebsockets                 int
	// Mutation rate limits (graph.RateLimiter); a zero Rate is no limit.
	RateLimitUser    graph.Rate
	RateLimitAddress graph.Rate
	// Query cost limits and failed logIns per handle.
	RateLimitQueryUser    graph.Rate
	RateLimitQueryAddress graph.Rate
	RateLimitLogIn        graph.Rate
	RateLimitExport       graph.Rate
	// Operation limits (graph.Config).
	MaxAliases       int
	MaxRootFields    int
	MaxTokens        int
	MaxResponseBytes int
	// QueryTimeout bounds each operation; ReadTimeout the reading of a
	// request's headers and body, WriteTimeout the writing of its response
	// once it is ready.
	QueryTimeout time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For names the client.
	TrustedProxies []netip.Prefix
	// StorageTimeout, when positive, bounds the storage work of one
	// request where the backend needs it (MongoDB: -mongodb-timeout): a
	// GraphQL HTTP request then gets the lesser of it and QueryTimeout. No
	// flag sets it; the program sets it from the backend it opened.
	StorageTimeout time.Duration
}

// DefaultOptions returns the defaults of the server's flags: the operation
// limits of graph.DefaultConfig, and the caps, rate limits and timeouts
// below.
func DefaultOptions() Options {
	def := graph.DefaultConfig()
	return Options{
		MaxBodyBytes:                  1 << 20,
		Introspection:                 def.Introspection,
		ComplexityLimit:               def.ComplexityLimit,
		MaxDepth:                      def.MaxDepth,
		MaxBatch:                      def.MaxBatch,
		MaxSubscriptionsPerConnection: 20,
		MaxWebsocketsPerUser:          16,
		MaxWebsocketsPerAddress:       256,
		MaxWebsockets:                 50_000,
		RateLimitUser:                 defaultUserRate,
		RateLimitAddress:              defaultAddressRate,
		RateLimitQueryUser:            defaultQueryUserRate,
		RateLimitQueryAddress:         defaultQueryAddressRate,
		RateLimitLogIn:                defaultLogInRate,
		RateLimitExport:               defaultExportRate,
		MaxAliases:                    def.MaxAliases,
		MaxRootFields:                 def.MaxRootFields,
		MaxTokens:                     def.MaxTokens,
		MaxResponseBytes:              def.MaxResponseBytes,
		QueryTimeout:                  def.QueryTimeout,
		ReadTimeout:                   30 * time.Second,
		WriteTimeout:                  30 * time.Second,
	}
}

// websocketLimits are the websocket caps of opts.
func websocketLimits(opts Options) ws.Limits {
	return ws.Limits{
		SubscriptionsPerConn: opts.MaxSubscriptionsPerConnection,
		PerUser:              opts.MaxWebsocketsPerUser,
		PerAddress:           opts.MaxWebsocketsPerAddress,
		Total:                opts.MaxWebsockets,
	}
}
