package httpserver

import (
	"net/http"

	"github.com/rs/cors"
)

// corsRequestHeaders are the request headers a page on an allowed origin may
// send to /graphql: those of GraphQL over HTTP and bearer authentication,
// and those Apollo Client adds (client awareness, and the two headers
// Apollo Server's CSRF prevention asks for, which Apollo's links may send
// to any server). A preflight asking for any other header is refused, so a
// client that adds its own must be listed here.
var corsRequestHeaders = []string{
	"Accept",
	"Authorization",
	"Content-Type",
	"Apollographql-Client-Name",
	"Apollographql-Client-Version",
	"Apollo-Require-Preflight",
	"X-Apollo-Operation-Name",
}

// corsMaxAge is how long, in seconds, a browser may reuse a preflight's
// answer: 2 hours, the most Chromium honours. A shorter time would buy
// nothing: an origin removed from the list is refused on the real request
// anyway, which carries no Access-Control-Allow-Origin any more.
const corsMaxAge = 2 * 60 * 60

// cors returns the CORS handler of /graphql, allowing the origins the
// websocket check allows (same origin, the list, or any with "*").
// Herald authenticates with bearer tokens, never cookies, so credentials
// are not allowed. A preflight (OPTIONS with Access-Control-Request-Method)
// is answered here with 204 and goes no further; any other OPTIONS request
// goes on to gqlgen's OPTIONS transport, which lists the methods in Allow.
// A request from an origin that is not allowed is served without CORS
// headers, so the browser keeps the answer from the page.
func (p *originPolicy) cors() *cors.Cors {
	return cors.New(cors.Options{
		AllowOriginVaryRequestFunc: func(r *http.Request, _ string) (bool, []string) {
			return p.allowed(r), nil
		},
		AllowedMethods: []string{http.MethodGet, http.MethodPost},
		AllowedHeaders: corsRequestHeaders,
		// Not a CORS-safelisted response header: without this, a page
		// could not read how long a rate-limited client must wait.
		ExposedHeaders: []string{"Retry-After"},
		MaxAge:         corsMaxAge,
	})
}
