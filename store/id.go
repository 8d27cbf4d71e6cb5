package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// ID identifies a user or a message. It has the size and shape of a MongoDB
// ObjectID so the MongoDB backend stores it natively: 6 bytes of Unix
// milliseconds, 3 random bytes chosen per process and a 3-byte counter. IDs
// made by one process are strictly increasing, so ordering by ID is ordering
// by creation time, and IDs made by different processes do not collide.
type ID [12]byte

// NilID is the zero ID; no stored object has it.
var NilID ID

var idGen struct {
	sync.Mutex
	ms      uint64
	counter uint32
	node    [3]byte
}

func init() {
	if _, err := rand.Read(idGen.node[:]); err != nil {
		panic("store: no randomness for ID generation: " + err.Error())
	}
}

// NewID returns a new ID for an object created at t.
func NewID(t time.Time) ID {
	ms := uint64(t.UnixMilli())
	idGen.Lock()
	if ms <= idGen.ms {
		// Keep IDs increasing when the clock stands still or steps back.
		ms = idGen.ms
		idGen.counter++
		if idGen.counter == 1<<24 {
			ms++
			idGen.counter = 0
		}
	} else {
		idGen.counter = 0
	}
	idGen.ms = ms
	c := idGen.counter
	idGen.Unlock()

	var id ID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms)
	copy(id[0:6], b[2:8])
	copy(id[6:9], idGen.node[:])
	id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c)
	return id
}

// ParseID parses the 24-character hex form made by ID.String. It returns
// BAD_USER_INPUT for anything else, uppercase hex included, so an object has
// one id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return NilID, Errorf(EINVALID, "malformed id")
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil || id.String() != s {
		return NilID, Errorf(EINVALID, "malformed id")
	}
	return id, nil
}

// String returns the ID as 24 lowercase hex characters.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is NilID.
func (id ID) IsZero() bool { return id == NilID }

// Time returns the creation time encoded in the ID, to the millisecond.
func (id ID) Time() time.Time {
	var b [8]byte
	copy(b[2:8], id[0:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:])))
}

// Compare orders IDs bytewise, which is creation order within one process.
func (id ID) Compare(other ID) int {
	for i := range id {
		if id[i] != other[i] {
			if id[i] < other[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
