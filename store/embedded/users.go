package embedded

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// CreateUser implements storage.Backend.
func (s *Store) CreateUser(_ context.Context, u *store.User) error {
	v, err := docs.Marshal(docs.FromUser(u))
	if err != nil {
		return fmt.Errorf("encode user: %w", err)
	}
	// Handles are claimed under the stripe lock of the handle's key, so two
	// sign-ups of one handle cannot both see it free.
	hk := key(pHandle, u.Handle)
	unlock := s.lock(hk)
	defer unlock()
	if _, ok, err := s.get(hk); err != nil {
		return err
	} else if ok {
		return store.Errorf(store.ECONFLICT, "handle %q is taken", u.Handle)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(hk, u.ID[:], nil)
	_ = b.Set(key(pUser, u.ID), v, nil)
	setSearchKeys(b, u.ID, nil, store.SearchTerms(u.Handle, u.DisplayName))
	// The head is in memory before the user is stored, so that whatever
	// finds the user finds its head; until then nothing changes it.
	h := head{seen: u.LastSeenAt.UnixMilli()}
	_ = b.Set(key(pHead, u.ID), h.encode(), nil)
	s.setHeads([]ownerHead{{u.ID, h}})
	if err := s.commit(b); err != nil {
		s.headsMu.Lock()
		delete(s.heads, u.ID)
		s.headsMu.Unlock()
		return err
	}
	return nil
}

func decodeUserDoc(v []byte) (*docs.User, error) {
	var d docs.User
	if err := docs.UnmarshalUser(v, &d); err != nil {
		return nil, fmt.Errorf("decode user: %w", err)
	}
	return &d, nil
}

func (s *Store) decodeUser(v []byte) (*store.User, error) {
	d, err := decodeUserDoc(v)
	if err != nil {
		return nil, err
	}
	u := d.Store()
	u.Attributes = s.userAttributes(d)
	return u, nil
}

// findUser reads a live user, through the cache of decoded users: a
// deleted one is NOT_FOUND.
func (s *Store) findUser(id store.ID) (*store.User, error) {
	u, err := cachedDoc(s, s.decoded.users, key(pUser, id), id, s.decodeUser, "user not found")
	if err == nil && !u.DeletedAt.IsZero() {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	return u, err
}

// live returns users with the deleted ones set to nil.
func live(users []*store.User, err error) ([]*store.User, error) {
	for i, u := range users {
		if u != nil && !u.DeletedAt.IsZero() {
			users[i] = nil
		}
	}
	return users, err
}

func (s *Store) findUserDoc(id store.ID) (*docs.User, error) {
	return findDoc(s, key(pUser, id), decodeUserDoc, "user not found")
}

// FindUserByID implements storage.Backend.
func (s *Store) FindUserByID(_ context.Context, id store.ID) (*store.User, error) {
	return s.findUser(id)
}

// FindUsersByIDs implements storage.Backend.
func (s *Store) FindUsersByIDs(_ context.Context, ids []store.ID) ([]*store.User, error) {
	return live(s.readUsers(ids))
}

// readUsers reads the users of ids, deleted or not, through the cache of
// decoded users, aligned with ids and nil where one is missing.
func (s *Store) readUsers(ids []store.ID) ([]*store.User, error) {
	slab := make([]store.User, len(ids))
	// A user document decodes by reflection, which may keep slices of
	// the bytes it reads (the password hash), so it decodes a copy.
	return cachedDocs(s, s.decoded.users, []byte{pUser}, ids, func(i int) *store.User { return &slab[i] },
		func(v []byte) (*store.User, error) { return s.decodeUser(bytes.Clone(v)) })
}

// FindUserByHandle implements storage.Backend.
func (s *Store) FindUserByHandle(_ context.Context, handle string) (*store.User, error) {
	v, ok, err := s.get(key(pHandle, handle))
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	var id store.ID
	copy(id[:], v)
	return s.findUser(id)
}

// FindUsersByHandles implements storage.Backend.
func (s *Store) FindUsersByHandles(ctx context.Context, handles []string) ([]*store.User, error) {
	out := make([]*store.User, len(handles))
	for i, h := range handles {
		u, err := s.FindUserByHandle(ctx, h)
		if store.ErrorCode(err) == store.ENOTFOUND {
			continue
		} else if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// UpdateUser implements storage.Backend.
func (s *Store) UpdateUser(_ context.Context, id store.ID, upd storage.UserUpdate) (*store.User, error) {
	return s.changeUser(id, func(d *docs.User) {
		if upd.DisplayName != nil {
			d.Name = *upd.DisplayName
		}
		if upd.Bio != nil {
			d.Bio = *upd.Bio
		}
		if upd.WebsiteURL != nil {
			d.Website = *upd.WebsiteURL
		}
		if upd.AvatarURL != nil {
			d.Avatar = *upd.AvatarURL
		}
		if upd.Private != nil {
			d.Private = *upd.Private
		}
		if upd.MessagesFrom != nil {
			d.MsgFrom = int32(*upd.MessagesFrom)
		}
	})
}

// changeUser reads user id's document, applies change and writes it back,
// under the user's stripe lock, and returns the user as written.
func (s *Store) changeUser(id store.ID, change func(d *docs.User)) (*store.User, error) {
	unlock := s.lock(id[:])
	defer unlock()
	d, err := s.findUserDoc(id)
	if err != nil {
		return nil, err
	}
	if d.Deleted != nil {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	name := d.Name
	change(d)
	b := s.db.NewBatch()
	defer b.Close()
	if err := setUserDoc(b, d); err != nil {
		return nil, err
	}
	if d.Name != name {
		setSearchKeys(b, id, store.SearchTerms(d.Handle, name), store.SearchTerms(d.Handle, d.Name))
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	u := d.Store()
	u.Attributes = s.userAttributes(d)
	return u, nil
}

// MarkSeen implements storage.Backend. The last-seen time is kept in the
// user document (User.LastSeenAt) and in the head, where fan-out reads it.
func (s *Store) MarkSeen(_ context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *storage.Job) (bool, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	unlock := s.lock(user[:])
	defer unlock()
	d, err := s.findUserDoc(user)
	if err != nil {
		return false, err
	}
	h, _ := s.headOf(user)
	returning := rebuild != nil && h.seen < inactiveBefore.UnixMilli()
	d.Seen, h.seen = at, at.UnixMilli()
	b := s.db.NewBatch()
	defer b.Close()
	if err := setUserDoc(b, d); err != nil {
		return false, err
	}
	if returning {
		if rebuild.Kind != storage.JobRebuild || rebuild.OwnerID != user {
			return false, fmt.Errorf("mark seen: rebuild job (kind %d) is not a JobRebuild of %s", rebuild.Kind, user)
		}
		h.rebuilding = true
		if err := setJob(b, rebuild); err != nil {
			return false, err
		}
	}
	_ = b.Set(key(pHead, user), s.stamp(h), nil)
	if err := s.commit(b); err != nil {
		return false, err
	}
	s.setHeads([]ownerHead{{user, h}})
	return returning, nil
}

// setUserDoc writes a user document into b.
func setUserDoc(b *pebble.Batch, d *docs.User) error {
	v, err := docs.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode user: %w", err)
	}
	return b.Set(key(pUser, store.ID(d.ID)), v, nil)
}

// RevokeTokens implements storage.Backend: a read-modify-write of the user
// document under its stripe lock.
func (s *Store) RevokeTokens(_ context.Context, id store.ID, r store.TokenRevocation) (*store.User, error) {
	return s.changeUser(id, func(d *docs.User) {
		version, revoked, kept := r.Apply(int(d.TokenVer), d.RevokedTokens(), d.Kept)
		d.TokenVer, d.Revoked, d.Kept = int64(version), docs.FromRevoked(revoked), kept
		if r.PasswordHash != nil {
			d.Pass = r.PasswordHash
		}
	})
}

// A user's search terms are keys s <term> 0x00 <user id> with no value, so
// a search reads one key range from s <prefix>; a term (letters, digits,
// underscores) has no 0x00, which ends it.
func searchKey(term string, id store.ID) []byte {
	return key(pSearch, term, []byte{0}, id)
}

// setSearchKeys replaces a user's search keys for terms old by those for
// terms now, in b.
func setSearchKeys(b *pebble.Batch, id store.ID, old, now []string) {
	for _, t := range old {
		if !slices.Contains(now, t) {
			_ = b.Delete(searchKey(t, id), nil)
		}
	}
	for _, t := range now {
		_ = b.Set(searchKey(t, id), nil, nil)
	}
}

// SearchUsers implements storage.Backend: one iteration of the prefix's key
// range, stopped at limit distinct users, then their documents.
func (s *Store) SearchUsers(ctx context.Context, prefix string, limit int) ([]*store.User, error) {
	p := key(pSearch, prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	var ids []store.ID
	for ok := it.First(); ok && len(ids) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) < len(store.ID{}) {
			continue
		}
		id := store.ID(k[len(k)-len(store.ID{}):])
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	users, err := s.FindUsersByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(users, func(u *store.User) bool { return u == nil }), nil
}

// pSearchReady marks a store whose every user has its search keys; a store
// from before search had none.
const pSearchReady = 'S'

// indexSearch gives every user its search keys, once per store: at the
// first open of a store from before search, a pass over the users in
// batches of 1,000, then the mark. Setting a key twice changes nothing, so
// a pass stopped halfway is simply done again at the next open.
func (s *Store) indexSearch() error {
	if _, ok, err := s.get([]byte{pSearchReady}); err != nil || ok {
		return err
	}
	p := []byte{pUser}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		d, err := decodeUserDoc(it.Value())
		if err != nil {
			return err
		}
		setSearchKeys(b, store.ID(d.ID), nil, store.SearchTerms(d.Handle, d.Name))
		if n++; n%1000 == 0 {
			if err := s.commit(b); err != nil {
				return err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	_ = b.Set([]byte{pSearchReady}, nil, nil)
	return s.commit(b)
}
