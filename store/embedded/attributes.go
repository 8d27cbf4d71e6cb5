package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/internal/docs"
)

// Keys of the name store and the attribute index:
//
//	N <name>                         token (4 bytes)
//	K <token>                        name
//	a <token> <len(value)> <value> <user>   users by attribute value
//
// Attribute names are the app's, so any text: stored once in the name store
// and referred to by a small integer token in user documents and the
// index (Field names and name store: docs/design.md#name-store). Tokens
// never change once given, so they are cached.
const (
	pName      = 'N'
	pToken     = 'K'
	pAttrIndex = 'a'
)

// names is the in-memory copy of the name store, loaded at open.
type names struct {
	mu      sync.RWMutex
	byName  map[string]int32
	byToken map[int32]string
	next    int32
}

func (s *Store) loadNames() error {
	s.names.byName = make(map[string]int32)
	s.names.byToken = make(map[int32]string)
	p := []byte{pToken}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		tok := int32(binary.BigEndian.Uint32(it.Key()[1:]))
		name := string(it.Value())
		s.names.byName[name], s.names.byToken[tok] = tok, name
		s.names.next = max(s.names.next, tok+1)
	}
	return it.Error()
}

// token returns the token of name, giving it the next one if it has none
// and create is set; ok is false for an unknown name when create is not set.
func (s *Store) token(name string, create bool) (tok int32, ok bool, err error) {
	s.names.mu.RLock()
	tok, ok = s.names.byName[name]
	s.names.mu.RUnlock()
	if ok || !create {
		return tok, ok, nil
	}
	s.names.mu.Lock()
	defer s.names.mu.Unlock()
	if tok, ok = s.names.byName[name]; ok {
		return tok, true, nil
	}
	tok = s.names.next
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pName, name), binary.BigEndian.AppendUint32(nil, uint32(tok)), nil)
	_ = b.Set(tokenKey(tok), []byte(name), nil)
	if err := s.commit(b); err != nil {
		return 0, false, err
	}
	s.names.next++
	s.names.byName[name], s.names.byToken[tok] = tok, name
	return tok, true, nil
}

func (s *Store) tokenName(tok int32) string {
	s.names.mu.RLock()
	defer s.names.mu.RUnlock()
	return s.names.byToken[tok]
}

func tokenKey(tok int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{pToken}, uint32(tok))
}

// attrIndexPrefix is the index prefix of one (token, value) pair; the value's
// length comes first so that no value is a prefix of another's key.
func attrIndexPrefix(tok int32, value string) []byte {
	k := binary.BigEndian.AppendUint32([]byte{pAttrIndex}, uint32(tok))
	k = binary.BigEndian.AppendUint16(k, uint16(len(value)))
	return append(k, value...)
}

// userAttributes returns d's attributes by name, sorted by name.
func (s *Store) userAttributes(d *docs.User) []store.Attribute {
	if len(d.Attrs) == 0 {
		return nil
	}
	out := make([]store.Attribute, len(d.Attrs))
	for i, a := range d.Attrs {
		out[i] = store.Attribute{Name: s.tokenName(a.Token), Value: a.Value}
	}
	slices.SortFunc(out, func(a, b store.Attribute) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SetAttributes implements storage.Backend.
func (s *Store) SetAttributes(_ context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error) {
	unlock := s.lock(id[:])
	defer unlock()
	d, err := s.findUserDoc(id)
	if err != nil {
		return nil, err
	}
	if d.Deleted != nil {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, c := range changes {
		tok, ok, err := s.token(c.Name, c.Value != nil)
		if err != nil {
			return nil, err
		} else if !ok {
			continue // removing a name nobody ever set
		}
		i := slices.IndexFunc(d.Attrs, func(a docs.Attr) bool { return a.Token == tok })
		if i >= 0 {
			_ = b.Delete(append(attrIndexPrefix(tok, d.Attrs[i].Value), id[:]...), nil)
			d.Attrs = slices.Delete(d.Attrs, i, i+1)
		}
		if c.Value != nil {
			d.Attrs = append(d.Attrs, docs.Attr{Token: tok, Value: *c.Value})
			_ = b.Set(append(attrIndexPrefix(tok, *c.Value), id[:]...), nil, nil)
		}
	}
	if len(d.Attrs) > store.MaxAttributes {
		return nil, store.Errorf(store.EINVALID, "a user has at most %d attributes", store.MaxAttributes)
	}
	slices.SortFunc(d.Attrs, func(a, b docs.Attr) int { return int(a.Token - b.Token) })
	v, err := docs.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode user: %w", err)
	}
	_ = b.Set(key(pUser, id), v, nil)
	if err := s.commit(b); err != nil {
		return nil, err
	}
	u := d.Store()
	u.Attributes = s.userAttributes(d)
	return u, nil
}

// CountUsersByAttribute implements storage.Backend.
func (s *Store) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	tok, ok, err := s.token(name, false)
	if err != nil || !ok {
		return 0, err
	}
	p := attrIndexPrefix(tok, value)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		// A count of a common value scans many keys: it stops when its
		// request does.
		if n++; n%scanCheckEvery == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return n, it.Error()
}

// FindUsersByAttribute implements storage.Backend.
func (s *Store) FindUsersByAttribute(_ context.Context, name, value string, r store.Range) ([]*store.User, error) {
	tok, ok, err := s.token(name, false)
	if err != nil || !ok {
		return nil, err
	}
	p := attrIndexPrefix(tok, value)
	sp := spanOf(p, r, false)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var ids []store.ID
	for ok := sp.first(it); ok && len(ids) < r.Limit; ok = sp.next(it) {
		ids = append(ids, idAfter(p, it.Key()))
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	users, err := live(s.readUsers(ids))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(users, func(u *store.User) bool { return u == nil }), nil
}

// scanCheckEvery is how many keys or seeks a long read makes between
// looks at its context, which cost little next to them.
const scanCheckEvery = 1024
