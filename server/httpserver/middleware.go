package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"herald/graph"
	"herald/graph/auth"
	"herald/server/ws"
	"herald/store"
)

// verifier checks a bearer token and returns the session it carries. It
// is *auth.Signer in the program; the interface keeps the middleware
// testable on its own.
type verifier interface {
	Verify(token string) (store.Session, error)
}

// authenticator checks that a verified session was not ended since
// (logged out, account gone): *service.Service in the program.
type authenticator interface {
	Authenticate(ctx context.Context, sess store.Session) error
}

// authMiddleware puts the session named by an "Authorization: Bearer
// <token>" header into the request context. Without the header the request
// goes on anonymously. A header that is malformed, or a token that is
// invalid, expired or ended, is answered at once with an UNAUTHENTICATED
// GraphQL error: going on anonymously would hide the client's mistake
// behind confusing permission errors further down.
func authMiddleware(v verifier, authn authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := auth.FromHeader(h)
		if !ok {
			writeRequestError(w, r, http.StatusUnauthorized, store.EUNAUTHENTICATED, `malformed Authorization header: want "Bearer <token>"`)
			return
		}
		sess, err := authenticate(r.Context(), v, authn, token)
		if err != nil {
			code, msg := store.EUNAUTHENTICATED, store.ErrorMessage(err)
			if c := store.ErrorCode(err); c != store.EUNAUTHENTICATED {
				// Storage failed while checking the token: not the
				// client's fault, and not a reason to drop its token.
				writeRequestError(w, r, http.StatusServiceUnavailable, c, msg)
				return
			}
			writeRequestError(w, r, http.StatusUnauthorized, code, msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(graph.NewContextWithSession(r.Context(), sess)))
	})
}

// authenticate verifies a bearer token and checks that its session may
// still be used, for a request's header and a websocket's connection_init
// alike. A failure of the token is UNAUTHENTICATED; of storage, its own
// code.
func authenticate(ctx context.Context, v verifier, authn authenticator, token string) (store.Session, error) {
	sess, err := v.Verify(token)
	if err != nil {
		return store.Session{}, err
	}
	if err := authn.Authenticate(ctx, sess); err != nil {
		return store.Session{}, err
	}
	return sess, nil
}

// bodyLimitMiddleware refuses a request body larger than limit bytes with
// 413. The body is read here in full (gqlgen reads it in full anyway) so
// the client gets a clear status instead of gqlgen's generic read error.
//
// The server's ReadTimeout bounds the time to send the body. Once it is
// in, the read deadline is lifted (left in place, it would expire while
// the operation runs and cancel it) and the response must be written
// within respond. A body that cannot be read (too large, too slow, cut
// off) closes the connection after the answer: what is left of it is
// unread, and net/http would otherwise read it, with no deadline, before
// answering.
func bodyLimitMiddleware(limit int64, respond time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		refuse := func(status int, msg string) {
			_ = rc.SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			writeRequestError(w, r, status, store.EINVALID, msg)
		}
		if r.ContentLength > limit {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
				return
			}
			refuse(http.StatusBadRequest, "could not read request body")
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Now().Add(respond))
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// deadlineMiddleware bounds an HTTP request's work to d, so a request on a
// storage that stopped answering fails with a coded error instead of
// waiting. Websocket upgrades are left alone: a subscription lives as
// long as its connection.
func deadlineMiddleware(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ws.IsUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// writeRequestError answers a request that never reached GraphQL execution
// with a GraphQL-shaped error. Following GraphQL over HTTP, a client that
// accepts application/graphql-response+json gets the real HTTP status, and
// a legacy application/json client gets 200 and learns from the body. Two
// cases always get the real status: 413, which concerns the transport, not
// GraphQL, and a websocket handshake, whose client sees only the status.
func writeRequestError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	ct := responseType(r)
	if ct == "application/json" && !ws.IsUpgrade(r) && status != http.StatusRequestEntityTooLarge {
		status = http.StatusOK
	}
	if status == http.StatusUnauthorized {
		// RFC 6750 §3: a 401 for a bearer token names the scheme.
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	w.Header().Set("Content-Type", ct+"; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{
			"message":    message,
			"extensions": map[string]any{"code": code},
		}},
	})
}

// responseType picks the media type of a response as the GraphQL transport
// does (graph.NegotiateResponseType), application/json when Accept names
// no type the server supports.
func responseType(r *http.Request) string {
	if mt, ok := graph.NegotiateResponseType(r.Header.Get("Accept")); ok {
		return mt
	}
	return graph.MediaTypeJSON
}

// accessLogMiddleware logs each request at debug level, once it is done
// (for a websocket: at the upgrade, with the handshake's time). It costs nothing when debug
// logging is off. "remote" is the peer; behind trusted proxies, "client"
// is the client as the rate limiter sees it (clientAddr).
func accessLogMiddleware(log *slog.Logger, trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if rec.hijacked {
			status = http.StatusSwitchingProtocols
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Int64("bytes", rec.bytes),
			slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		}
		if a, ok := clientAddr(r, trusted); ok && len(trusted) > 0 {
			attrs = append(attrs, slog.String("client", a.String()))
		}
		log.LogAttrs(r.Context(), slog.LevelDebug, "request", attrs...)
	})
}

// statusRecorder records the status and size of a response. It passes
// Hijack and Flush through, which the websocket upgrade and streaming
// transports need.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
}

// WriteHeader records the first status written and passes it on.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write counts the bytes written; a write before WriteHeader means 200.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Hijack implements http.Hijacker for the websocket upgrade.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response writer does not support hijacking")
	}
	c, rw, err := h.Hijack()
	if err == nil {
		s.hijacked = true
	}
	return c, rw, err
}

// Flush implements http.Flusher.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
