package httpserver

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"herald/graph"
)

// clientAddrMiddleware puts the client's address (clientAddr) into the
// request context, where the mutation rate limiter keys its address
// buckets. A websocket's operations see the address of its handshake.
func clientAddrMiddleware(trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := clientAddr(r, trusted); ok {
			r = r.WithContext(graph.NewContextWithClientAddr(r.Context(), a))
		}
		next.ServeHTTP(w, r)
	})
}

// clientAddr returns the address of the client that sent r. It is the peer
// (r.RemoteAddr), unless the peer is a trusted proxy: then X-Forwarded-For
// is read from the right, each entry having been appended by the hop after
// it, and the first address that is not a trusted proxy is the client. The
// entries left of it were written by whoever the client is, so they are
// never believed. An entry that is not an address stops the walk at the
// last trusted hop. ok is false only when the peer's address is unknown.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := peer.Addr().Unmap()
	if !isTrusted(addr, trusted) {
		return addr, true
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(strings.TrimSpace(hops[i]))
		if !ok {
			break
		}
		addr = hop
		if !isTrusted(addr, trusted) {
			break
		}
	}
	return addr, true
}

// parseHop reads one X-Forwarded-For entry: an address, or an address and
// port as some proxies write it ("192.0.2.1:443", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// prefixes ("10.0.0.0/8, 192.0.2.7, fd00::/8").
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("invalid prefix %q: want an address or a CIDR such as 10.0.0.0/8", part)
			}
			if p.Addr().Is4In6() {
				// Addresses are compared unmapped, so such a prefix would
				// match nothing.
				return nil, fmt.Errorf("invalid prefix %q: write IPv4 prefixes in IPv4 form", part)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("invalid address %q: want an address or a CIDR such as 10.0.0.0/8", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
