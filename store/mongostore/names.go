package mongostore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// namesPerDoc is how many names one name-store document holds (Field names
// and name store: docs/design.md#name-store). A document's _id is its
// "least value": the token of its first name, so a name's token is _id +
// its index in l, and a token's document is token - token % namesPerDoc.
const namesPerDoc = 100

// tokenCache keeps tokens in memory: a token never changes once given.
type tokenCache struct {
	mu      sync.RWMutex
	byName  map[string]int32
	byToken map[int32]string
}

func newTokenCache() *tokenCache {
	return &tokenCache{byName: map[string]int32{}, byToken: map[int32]string{}}
}

func (c *tokenCache) put(name string, tok int32) {
	c.mu.Lock()
	c.byName[name], c.byToken[tok] = tok, name
	c.mu.Unlock()
}

type nameDoc struct {
	Least int32    `bson:"_id"`
	Names []string `bson:"l"`
}

// lookupName finds the token of a registered name, or ok false.
func (s *Store) lookupName(ctx context.Context, name string) (int32, bool, error) {
	var d nameDoc
	err := s.names.FindOne(ctx, bson.D{{Key: "l", Value: name}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, wrap("name store", err)
	}
	i := slices.Index(d.Names, name)
	if i < 0 {
		return 0, false, nil
	}
	tok := d.Least + int32(i)
	s.tokens.put(name, tok)
	return tok, true, nil
}

// token returns name's token, registering the name if create is set: an
// atomic conditional $push onto the newest name-store document (only if the
// name is not there and the document is not full); a full document makes
// the next one, whose least value follows, created atomically by its
// unique _id. Any number of processes may register names at once.
func (s *Store) token(ctx context.Context, name string, create bool) (int32, bool, error) {
	s.tokens.mu.RLock()
	tok, ok := s.tokens.byName[name]
	s.tokens.mu.RUnlock()
	if ok {
		return tok, true, nil
	}
	if tok, ok, err := s.lookupName(ctx, name); err != nil || ok || !create {
		return tok, ok, err
	}
	for {
		var last nameDoc
		err := s.names.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&last)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if _, err := s.names.InsertOne(ctx, nameDoc{Least: 0, Names: []string{}}); err != nil && !isDuplicate(err) {
				return 0, false, wrap("name store", err)
			}
			continue
		} else if err != nil {
			return 0, false, wrap("name store", err)
		}
		res, err := s.names.UpdateOne(ctx, bson.D{
			{Key: "_id", Value: last.Least},
			{Key: "l", Value: bson.D{{Key: "$ne", Value: name}}},
			{Key: "l." + strconv.Itoa(namesPerDoc-1), Value: bson.D{{Key: "$exists", Value: false}}},
		}, bson.D{{Key: "$push", Value: bson.D{{Key: "l", Value: name}}}})
		if err != nil {
			return 0, false, wrap("name store", err)
		}
		if tok, ok, err := s.lookupName(ctx, name); err != nil || ok {
			return tok, ok, err // pushed by us or by another process
		}
		if res.ModifiedCount == 0 {
			// Full: open the next document, unless another process did.
			next := nameDoc{Least: last.Least + namesPerDoc, Names: []string{}}
			if _, err := s.names.InsertOne(ctx, next); err != nil && !isDuplicate(err) {
				return 0, false, wrap("name store", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
}

// tokenName returns the name of a token, from the cache or its document.
func (s *Store) tokenName(ctx context.Context, tok int32) (string, error) {
	s.tokens.mu.RLock()
	name, ok := s.tokens.byToken[tok]
	s.tokens.mu.RUnlock()
	if ok {
		return name, nil
	}
	var d nameDoc
	err := s.names.FindOne(ctx, bson.D{{Key: "_id", Value: tok - tok%namesPerDoc}}).Decode(&d)
	if err != nil {
		return "", wrap("name store", err)
	}
	for i, n := range d.Names {
		s.tokens.put(n, d.Least+int32(i))
	}
	if i := int(tok - d.Least); i < len(d.Names) {
		return d.Names[i], nil
	}
	return "", wrap("name store", errors.New("unknown name token"))
}

// attributes turns stored attributes into named ones, sorted by name.
func (s *Store) attributes(ctx context.Context, as []docs.Attr) ([]store.Attribute, error) {
	if len(as) == 0 {
		return nil, nil
	}
	out := make([]store.Attribute, len(as))
	for i, a := range as {
		name, err := s.tokenName(ctx, a.Token)
		if err != nil {
			return nil, err
		}
		out[i] = store.Attribute{Name: name, Value: a.Value}
	}
	slices.SortFunc(out, func(a, b store.Attribute) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetAttributes implements storage.Backend: read, change, and write back
// conditionally on the attributes' version, retrying if another writer
// came between.
func (s *Store) SetAttributes(ctx context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error) {
	toks := make([]int32, len(changes))
	known := make([]bool, len(changes))
	for i, c := range changes {
		var err error
		if toks[i], known[i], err = s.token(ctx, c.Name, c.Value != nil); err != nil {
			return nil, err
		}
	}
	for n := 1; ; n++ {
		d, err := s.findUserDoc(ctx, id)
		if err != nil {
			return nil, err
		}
		if d.Deleted != nil {
			return nil, store.Errorf(store.ENOTFOUND, "user not found")
		}
		attrs := slices.Clone(d.Attrs)
		for i, c := range changes {
			if !known[i] {
				continue
			}
			attrs = slices.DeleteFunc(attrs, func(a docs.Attr) bool { return a.Token == toks[i] })
			if c.Value != nil {
				attrs = append(attrs, docs.Attr{Token: toks[i], Value: *c.Value})
			}
		}
		if len(attrs) > store.MaxAttributes {
			return nil, store.Errorf(store.EINVALID, "a user has at most %d attributes", store.MaxAttributes)
		}
		slices.SortFunc(attrs, func(a, b docs.Attr) int { return int(a.Token - b.Token) })
		res, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(id)}, {Key: "av", Value: versionMatch(d.AttrsVer)}, notDeleted},
			bson.D{{Key: "$set", Value: bson.D{{Key: "at", Value: attrs}, {Key: "av", Value: d.AttrsVer + 1}}}})
		if err != nil {
			return nil, wrap("set attributes", err)
		}
		if res.MatchedCount == 1 {
			d.Attrs, d.AttrsVer = attrs, d.AttrsVer+1
			return s.decodeUser(ctx, d)
		}
		if err := again(ctx, n, "set attributes"); err != nil {
			return nil, err
		}
	}
}

// versionMatch matches a stored number; 0 also matches a missing field
// (numbers are stored with omitempty).
func versionMatch(v int64) any {
	if v == 0 {
		return bson.D{{Key: "$in", Value: bson.A{nil, int64(0)}}}
	}
	return v
}

func attrFilter(tok int32, value string) bson.D {
	return bson.D{{Key: "at", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "k", Value: tok}, {Key: "v", Value: value}}}}}}
}

// FindUsersByAttribute implements storage.Backend, through the attributes index.
func (s *Store) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, error) {
	tok, ok, err := s.token(ctx, name, false)
	if err != nil || !ok {
		return nil, err
	}
	cond, sort := idRange("_id", r, false)
	filter := append(attrFilter(tok, value), cond...)
	ds, err := s.findUserDocs(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(r.Limit)))
	if err != nil {
		return nil, err
	}
	out := make([]*store.User, len(ds))
	for i, d := range ds {
		if out[i], err = s.decodeUser(ctx, d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CountUsersByAttribute implements storage.Backend.
func (s *Store) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	tok, ok, err := s.token(ctx, name, false)
	if err != nil || !ok {
		return 0, err
	}
	n, err := s.users.CountDocuments(ctx, attrFilter(tok, value))
	return int(n), wrap("count users", err)
}

// ReleaseFanoutLease implements storage.Leaser: lane 0's lease.
func (s *Store) ReleaseFanoutLease(ctx context.Context, holder string) error {
	return s.ReleaseLaneLease(ctx, 0, holder)
}

// beginJob records on the lease document of j's lane which job the lane's
// holder is running, before its first write of a chunk. The markers that
// make a chunk idempotent (lj, lq) hold only the last job per inbox, so a
// chunk cut short must be finished before any other job touches those
// inboxes; the lane's next holder reads this record to run that job first
// (PendingJobs).
func (s *Store) beginJob(ctx context.Context, j *storage.Job) error {
	k := jobKey{j.ID, j.Kind}
	lane := jobLane(j, max(int(s.lanes.Load()), 1))
	if v, ok := s.inFlight.Load(lane); ok && v.(jobKey) == k {
		return nil
	}
	_, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "cur", Value: oid(j.ID)}, {Key: "ck", Value: int32(j.Kind)}}}},
		options.Update().SetUpsert(true))
	if err != nil {
		return wrap("record running job", err)
	}
	s.inFlight.Store(lane, k)
	return nil
}

type jobKey struct {
	id   store.ID
	kind storage.JobKind
}

// runningJob returns the job last begun by a holder of lane, if any.
func (s *Store) runningJob(ctx context.Context, lane int) (jobKey, bool, error) {
	var d struct {
		Msg  *primitive.ObjectID `bson:"cur"`
		Kind int32               `bson:"ck"`
	}
	err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && d.Msg == nil) {
		return jobKey{}, false, nil
	} else if err != nil {
		return jobKey{}, false, wrap("read running job", err)
	}
	return jobKey{store.ID(*d.Msg), storage.JobKind(d.Kind)}, true, nil
}

// TryFanoutLease implements storage.Leaser: lane 0's lease.
func (s *Store) TryFanoutLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	return s.TryLaneLease(ctx, 0, holder, ttl)
}
