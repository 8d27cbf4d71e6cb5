package httpserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"herald/server/ws"
)

// originPolicy decides which browser origins may open a websocket, and
// (through cors) which may call /graphql over HTTP. A websocket is not
// subject to CORS, so without this check any page a user visits could open
// one with the user's cookies (cross-site websocket hijacking). Herald
// authenticates with bearer tokens, not cookies, but the check is cheap and
// keeps that door shut for good.
type originPolicy struct {
	any  bool
	list map[string]bool // normalized "scheme://host[:port]"
}

// newOriginPolicy builds a policy from an allow-list of origins such as
// "https://app.example.com". The entry "*" allows every origin.
func newOriginPolicy(origins []string) (*originPolicy, error) {
	p := &originPolicy{list: make(map[string]bool)}
	for _, o := range origins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			p.any = true
			continue
		}
		n, ok := normalizeOrigin(o)
		if !ok {
			return nil, fmt.Errorf("invalid origin %q: want scheme://host[:port]", o)
		}
		p.list[n] = true
	}
	return p, nil
}

// ValidateOrigins checks an allow-list of origins as newOriginPolicy reads
// it, so that a mistake is reported at start.
func ValidateOrigins(origins []string) error {
	_, err := newOriginPolicy(origins)
	return err
}

// allowed reports whether r may be upgraded: requests without an Origin
// (non-browser clients), same-origin requests, and listed origins.
func (p *originPolicy) allowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	n, ok := normalizeOrigin(origin)
	return ok && p.list[n]
}

// middleware answers 403 to an upgrade request from an origin that is not
// allowed, before gqlgen sees it (gqlgen would answer any failed upgrade
// with 400).
func (p *originPolicy) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ws.IsUpgrade(r) && !p.allowed(r) {
			http.Error(w, "websocket origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), true
}
