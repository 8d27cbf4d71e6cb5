package graph

import (
	"context"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"herald/graph/model"
	"herald/store"
)

// The home timeline (Query.inbox) is Herald's hottest read, and gqlgen's
// executor spends most of its time on it in machinery: a field context,
// closures and a middleware call for every field of every edge, a goroutine
// for every edge and for every Message with more than one resolver field.
// Once Resolver.inbox has preloaded what the selection asks for, nothing
// under the page needs I/O, so inboxFastPath writes the page itself, in one
// pass over the edges.
//
// It takes the common case only and gives everything else back to gqlgen
// unchanged: a selection with a field outside fastTypes, @defer, an
// argument it cannot read, a resolver error (UNAUTHENTICATED, a bad
// cursor, an author that failed to load) or a null where the schema
// forbids one. gqlgen then resolves the field again (from the loaders'
// cache) and reports the errors and nulls as it always does, so the fast
// path never has to produce an error response. Values come from the same
// resolvers (Query.inbox, Message.author) and struct fields that gqlgen
// would use, the ids from globalID as the Message.id and User.id resolvers
// make them, and are written with gqlgen's encodings.

// fastType is what inboxFastPath knows of an object type: the names it
// matches fragments against (gqlgen's implementors) and its fields, each
// with the object type of its value ("" for a scalar or enum).
type fastType struct {
	implementors []string
	fields       map[string]string
}

// fastTypes are the types under Query.inbox that inboxFastPath writes.
var fastTypes = map[string]fastType{
	"InboxConnection": {[]string{"InboxConnection"}, map[string]string{
		"__typename": "", "totalCount": "", "unreadCount": "", "rebuilding": "",
		"edges": "InboxEdge", "pageInfo": "PageInfo",
	}},
	"InboxEdge": {[]string{"InboxEdge"}, map[string]string{
		"__typename": "", "cursor": "", "deliveredAt": "", "node": "Message", "repostedBy": "User",
	}},
	"Message": {[]string{"Message", "Node"}, map[string]string{
		"__typename": "", "id": "", "text": "", "kind": "", "createdAt": "", "editedAt": "",
		"likeCount": "", "replyCount": "", "viewerHasLiked": "", "repostCount": "", "viewerHasReposted": "",
		"author": "User", "mentions": "User",
	}},
	"User": {[]string{"User", "Node"}, map[string]string{
		"__typename": "", "id": "", "handle": "", "displayName": "", "createdAt": "",
		"followerCount": "", "followingCount": "", "messageCount": "",
	}},
	"PageInfo": {[]string{"PageInfo"}, map[string]string{
		"__typename": "", "hasNextPage": "", "hasPreviousPage": "", "startCursor": "", "endCursor": "",
	}},
}

// fastField is one field of a selection, collected as gqlgen collects it
// (fragments spread, @skip and @include applied, same-alias fields merged).
type fastField struct {
	key  []byte // `"alias":`, ready to write
	name string
	sub  []fastField // the selection of an object field
}

// planFast collects sel on an object of type typ, or returns false if any
// field is one inboxFastPath does not write or is deferred.
func planFast(oc *graphql.OperationContext, sel ast.SelectionSet, typ string) ([]fastField, bool) {
	t := fastTypes[typ]
	collected := graphql.CollectFields(oc, sel, t.implementors)
	out := make([]fastField, 0, len(collected))
	for _, f := range collected {
		child, ok := t.fields[f.Name]
		if !ok || f.IsDeferred() || len(f.Deferrables) > 0 {
			return nil, false
		}
		ff := fastField{key: append(appendQuoted(nil, f.Alias), ':'), name: f.Name}
		if child != "" {
			if ff.sub, ok = planFast(oc, f.Selections, child); !ok {
				return nil, false
			}
		}
		out = append(out, ff)
	}
	return out, true
}

// inboxFastPath is the root field middleware that writes Query.inbox
// itself when it can (see above) and otherwise calls next.
func inboxFastPath(r *Resolver) graphql.RootFieldMiddleware {
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		if m, ok := r.fastInbox(ctx); ok {
			return m
		}
		return next(ctx)
	}
}

// fastInbox writes the inbox field of the root field in ctx, or returns
// false for gqlgen to resolve it. A panic also returns false: gqlgen then
// runs the field again under its own recovery, which reports it.
func (r *Resolver) fastInbox(ctx context.Context) (m graphql.Marshaler, ok bool) {
	oc := graphql.GetOperationContext(ctx)
	rf := graphql.GetRootFieldContext(ctx)
	if rf == nil || rf.Field.Name != "inbox" || oc.Operation == nil || oc.Operation.Operation != ast.Query {
		return nil, false
	}
	sel, ok := planFast(oc, rf.Field.Selections, "InboxConnection")
	if !ok {
		return nil, false
	}
	args, ok := inboxArgs(rf.Field.ArgumentMap(oc.Variables))
	if !ok {
		return nil, false
	}
	defer func() {
		if recover() != nil {
			m, ok = nil, false
		}
	}()
	// The field context gqlgen would make: the resolver reads the
	// selection from it (graphql.FieldRequested).
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{
		Object: "Query", Field: rf.Field, Args: args, IsMethod: true, IsResolver: true,
	})
	conn, err := r.Query().Inbox(ctx, intArg(args["first"]), stringArg(args["after"]), intArg(args["last"]), stringArg(args["before"]))
	if err != nil || conn == nil {
		return nil, false
	}
	pb := getBuf()
	w := fastWriter{ctx: ctx, r: r, buf: slices.Grow((*pb)[:0], 256+300*len(conn.Edges))}
	if !w.connection(sel, conn) {
		*pb = w.buf
		putBuf(pb)
		return nil, false
	}
	*pb = w.buf
	return &pooledJSON{buf: pb}, true
}

// inboxArgs reads inbox's arguments as the generated code does: first and
// last as *int, after and before as *string, nil when absent or null.
func inboxArgs(raw map[string]any) (map[string]any, bool) {
	args := make(map[string]any, 4)
	for _, name := range []string{"first", "last"} {
		var v *int
		if x, ok := raw[name]; ok && x != nil {
			n, err := graphql.UnmarshalInt(x)
			if err != nil {
				return nil, false
			}
			v = &n
		}
		args[name] = v
	}
	for _, name := range []string{"after", "before"} {
		var v *string
		if x, ok := raw[name]; ok && x != nil {
			s, err := graphql.UnmarshalString(x)
			if err != nil {
				return nil, false
			}
			v = &s
		}
		args[name] = v
	}
	return args, true
}

func intArg(v any) *int       { p, _ := v.(*int); return p }
func stringArg(v any) *string { p, _ := v.(*string); return p }

// pooledJSON is a Marshaler of JSON already written into a buffer of
// bufPool, which it puts back once written: gqlgen marshals a root field's
// value once, into the response's data, which copies it. A value gqlgen
// drops unwritten leaves its buffer to the GC.
type pooledJSON struct{ buf *[]byte }

// MarshalGQL implements graphql.Marshaler. A second call panics (gqlgen
// reports INTERNAL) rather than write a page that is no longer there.
func (p *pooledJSON) MarshalGQL(w io.Writer) {
	if p.buf == nil {
		panic("graph: inbox page marshaled twice")
	}
	_, _ = w.Write(*p.buf)
	putBuf(p.buf)
	p.buf = nil
}

// fastWriter appends the JSON of a page to buf. Each method returns false
// where gqlgen would report an error or a null in a non-null field.
type fastWriter struct {
	ctx context.Context
	r   *Resolver
	buf []byte
}

func (w *fastWriter) object(sel []fastField, field func(f *fastField) bool) bool {
	w.buf = append(w.buf, '{')
	for i := range sel {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, sel[i].key...)
		if !field(&sel[i]) {
			return false
		}
	}
	w.buf = append(w.buf, '}')
	return true
}

func (w *fastWriter) connection(sel []fastField, c *model.InboxConnection) bool {
	return w.object(sel, func(f *fastField) bool {
		switch f.name {
		case "__typename":
			w.str("InboxConnection")
		case "totalCount":
			w.int(c.TotalCount)
		case "unreadCount":
			w.int(c.UnreadCount)
		case "rebuilding":
			w.bool(c.Rebuilding)
		case "pageInfo":
			return c.PageInfo != nil && w.pageInfo(f.sub, c.PageInfo)
		case "edges":
			if c.Edges == nil {
				return false
			}
			w.buf = append(w.buf, '[')
			for i, e := range c.Edges {
				if i > 0 {
					w.buf = append(w.buf, ',')
				}
				if e == nil || !w.edge(f.sub, e) {
					return false
				}
			}
			w.buf = append(w.buf, ']')
		}
		return true
	})
}

func (w *fastWriter) edge(sel []fastField, e *model.InboxEdge) bool {
	return w.object(sel, func(f *fastField) bool {
		switch f.name {
		case "__typename":
			w.str("InboxEdge")
		case "cursor":
			w.str(e.Cursor)
		case "deliveredAt":
			return w.time(e.DeliveredAt)
		case "node":
			return e.Node != nil && w.message(f.sub, e.Node)
		case "repostedBy":
			u, err := w.r.InboxEdge().RepostedBy(w.ctx, e)
			if err != nil {
				return false
			}
			if u == nil {
				w.buf = append(w.buf, "null"...)
				return true
			}
			return w.user(f.sub, u)
		}
		return true
	})
}

func (w *fastWriter) message(sel []fastField, m *store.Message) bool {
	return w.object(sel, func(f *fastField) bool {
		switch f.name {
		case "__typename":
			w.str("Message")
		case "id":
			w.globalID(typeMessage, m.ID)
		case "text":
			w.str(m.Text)
		case "kind":
			w.str(messageKindNames[m.Kind])
		case "createdAt":
			return w.time(m.CreatedAt)
		case "editedAt":
			if m.EditedAt == nil || m.EditedAt.IsZero() {
				w.buf = append(w.buf, "null"...)
			} else {
				w.time(*m.EditedAt)
			}
		case "author":
			u, err := w.r.Message().Author(w.ctx, m)
			return err == nil && u != nil && w.user(f.sub, u)
		case "likeCount":
			w.int(m.LikeCount)
		case "replyCount":
			w.int(m.ReplyCount)
		case "viewerHasLiked":
			liked, err := w.r.Message().ViewerHasLiked(w.ctx, m)
			if err != nil {
				return false
			}
			w.bool(liked)
		case "repostCount":
			w.int(m.RepostCount)
		case "viewerHasReposted":
			reposted, err := w.r.Message().ViewerHasReposted(w.ctx, m)
			if err != nil {
				return false
			}
			w.bool(reposted)
		case "mentions":
			us, err := w.r.Message().Mentions(w.ctx, m)
			if err != nil || us == nil {
				return false
			}
			w.buf = append(w.buf, '[')
			for i, u := range us {
				if i > 0 {
					w.buf = append(w.buf, ',')
				}
				if u == nil || !w.user(f.sub, u) {
					return false
				}
			}
			w.buf = append(w.buf, ']')
		}
		return true
	})
}

// messageKindNames are the GraphQL names of the MessageKind values, as
// gqlgen.yml maps them; gqlgen writes "" for any other value, and so does
// the fast path.
var messageKindNames = map[store.MessageKind]string{
	store.KindPost:   "POST",
	store.KindReply:  "REPLY",
	store.KindRepost: "REPOST",
}

func (w *fastWriter) user(sel []fastField, u *store.User) bool {
	return w.object(sel, func(f *fastField) bool {
		switch f.name {
		case "__typename":
			w.str("User")
		case "id":
			w.globalID(typeUser, u.ID)
		case "handle":
			w.str(u.Handle)
		case "displayName":
			w.str(u.DisplayName)
		case "createdAt":
			return w.time(u.CreatedAt)
		case "followerCount":
			w.int(u.FollowerCount)
		case "followingCount":
			w.int(u.FollowingCount)
		case "messageCount":
			w.int(u.MessageCount)
		}
		return true
	})
}

func (w *fastWriter) pageInfo(sel []fastField, p *model.PageInfo) bool {
	return w.object(sel, func(f *fastField) bool {
		switch f.name {
		case "__typename":
			w.str("PageInfo")
		case "hasNextPage":
			w.bool(p.HasNextPage)
		case "hasPreviousPage":
			w.bool(p.HasPreviousPage)
		case "startCursor":
			w.optStr(p.StartCursor)
		case "endCursor":
			w.optStr(p.EndCursor)
		}
		return true
	})
}

func (w *fastWriter) str(s string) { w.buf = appendQuoted(w.buf, s) }

// globalID writes the id the Message.id and User.id resolvers return
// (globalID), without making it a string first; it needs no escaping.
func (w *fastWriter) globalID(typ string, id store.ID) {
	w.buf = append(appendGlobalID(append(w.buf, '"'), typ, id), '"')
}

func (w *fastWriter) optStr(s *string) {
	if s == nil {
		w.buf = append(w.buf, "null"...)
		return
	}
	w.str(*s)
}

func (w *fastWriter) int(n int) { w.buf = strconv.AppendInt(w.buf, int64(n), 10) }

func (w *fastWriter) bool(b bool) { w.buf = strconv.AppendBool(w.buf, b) }

// time writes a non-null Time as graphql.MarshalTime does; a zero time,
// which gqlgen writes as null, returns false.
func (w *fastWriter) time(t time.Time) bool {
	if t.IsZero() {
		return false
	}
	w.buf = append(w.buf, '"')
	w.buf = t.AppendFormat(w.buf, time.RFC3339Nano)
	w.buf = append(w.buf, '"')
	return true
}

// appendQuoted appends s as a JSON string escaped as gqlgen's
// graphql.MarshalString escapes it: control characters, '\\' and '"'
// escaped, everything else (invalid UTF-8 included) as it is.
func appendQuoted(buf []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '\t':
			buf = append(buf, `\t`...)
		case '\r':
			buf = append(buf, `\r`...)
		case '\n':
			buf = append(buf, `\n`...)
		case '\\':
			buf = append(buf, `\\`...)
		case '"':
			buf = append(buf, `\"`...)
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
