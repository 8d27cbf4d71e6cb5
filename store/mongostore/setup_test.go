package mongostore

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
)

// commandName returns the first key of a step's command.
func commandName(s Step) string { return s.Command[0].Key }

func stepsOf(steps []Step, name string) []Step {
	var out []Step
	for _, s := range steps {
		if commandName(s) == name {
			out = append(out, s)
		}
	}
	return out
}

func TestPlan_Indexes(t *testing.T) {
	steps := Plan(SetupOptions{})
	require.Len(t, steps, len(indexes), "one step per index, nothing else without -sharded")
	for i, ix := range indexes {
		s := steps[i]
		name := *ix.model.Options.Name
		assert.Equal(t, StepIndex, s.Kind)
		assert.False(t, s.Sharding)
		assert.Equal(t, "herald", s.Database)
		assert.Contains(t, s.Description, ix.coll+"."+name)
		assert.Contains(t, s.Description, ix.why, "the reason from schema.go")
		js := s.CommandJSON()
		assert.Contains(t, js, `{"createIndexes":"`+ix.coll+`","indexes":[{"key":`)
		assert.Contains(t, js, `"name":"`+name+`"`)
	}
	assert.Contains(t, stepsOf(steps, "createIndexes")[len(indexes)-1].CommandJSON(), `"expireAfterSeconds":0`)
	assert.Contains(t, Plan(SetupOptions{})[8].CommandJSON(), `"partialFilterExpression":{"j":{"$exists":true}}`)
}

// TestPlan_IndexOptions guards indexSpec: every option schema.go sets must
// be one indexSpec prints, or the dry run would show a different index
// than the one created.
func TestPlan_IndexOptions(t *testing.T) {
	handled := map[string]bool{"Name": true, "Unique": true, "Sparse": true, "PartialFilterExpression": true, "ExpireAfterSeconds": true}
	for _, ix := range indexes {
		v := reflect.ValueOf(ix.model.Options).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || v.Field(i).IsNil() {
				continue
			}
			assert.True(t, handled[f.Name], "index %s.%s sets %s, which indexSpec does not print", ix.coll, *ix.model.Options.Name, f.Name)
		}
	}
}

func TestPlan_Sharded(t *testing.T) {
	steps := Plan(SetupOptions{Database: "social", Sharded: true})

	es := stepsOf(steps, "enableSharding")
	require.Len(t, es, 1)
	assert.Equal(t, "admin", es[0].Database)
	assert.Equal(t, `{"enableSharding":"social"}`, es[0].CommandJSON())

	sc := stepsOf(steps, "shardCollection")
	require.Len(t, sc, len(shardKeys))
	for i, k := range shardKeys {
		js, err := bson.MarshalExtJSON(k.key, false, false)
		require.NoError(t, err)
		assert.Equal(t, `{"shardCollection":"social.`+k.coll+`","key":`+string(js)+`}`, sc[i].CommandJSON())
		assert.Contains(t, sc[i].Description, k.why)
		assert.True(t, sc[i].Sharding)
	}

	// Shard keys no index supports get one before shardCollection: the
	// hashed users, conversations, read states, notification heads and caches keys, and messages' (a, _id) (the outbox
	// index runs _id descending, which cannot serve a shard key). The
	// others are served by their unique indexes or _id.
	var keyIdx []string
	for _, s := range steps {
		if s.Kind == StepIndex && s.shardKey {
			keyIdx = append(keyIdx, s.CommandJSON())
		}
	}
	assert.Equal(t, []string{
		`{"createIndexes":"users","indexes":[{"key":{"_id":"hashed"},"name":"shardkey"}]}`,
		`{"createIndexes":"messages","indexes":[{"key":{"a":1,"_id":1},"name":"shardkey"}]}`,
		`{"createIndexes":"convs","indexes":[{"key":{"_id":"hashed"},"name":"shardkey"}]}`,
		`{"createIndexes":"dmreads","indexes":[{"key":{"_id":"hashed"},"name":"shardkey"}]}`,
		`{"createIndexes":"notifheads","indexes":[{"key":{"_id":"hashed"},"name":"shardkey"}]}`,
		`{"createIndexes":"caches","indexes":[{"key":{"_id":"hashed"},"name":"shardkey"}]}`,
	}, keyIdx)

	// Order: every index, then enableSharding, then shardCollection.
	first := func(name string) int {
		for i, s := range steps {
			if commandName(s) == name {
				return i
			}
		}
		return -1
	}
	last := 0
	for i, s := range steps {
		if s.Kind == StepIndex {
			last = i
		}
	}
	assert.Less(t, last, first("enableSharding"))
	assert.Less(t, first("enableSharding"), first("shardCollection"))
	assert.Empty(t, stepsOf(steps, "updateZoneKeyRange"), "no zones without TimeZones")
}

func TestPlan_TimeZones(t *testing.T) {
	now := time.Date(2025, 6, 30, 15, 4, 5, 0, time.UTC)
	steps := Plan(SetupOptions{
		Sharded: true, TimeZones: true, ColdAfter: 30 * 24 * time.Hour,
		HotShards: []string{"rs-hot-1", "rs-hot-2"}, ColdShards: []string{"rs-cold"},
		Now: func() time.Time { return now },
	})

	var messages Step
	for _, s := range stepsOf(steps, "shardCollection") {
		if strings.Contains(s.CommandJSON(), `"herald.messages"`) {
			messages = s
		}
	}
	assert.Equal(t, `{"shardCollection":"herald.messages","key":{"_id":1}}`, messages.CommandJSON())
	for _, s := range steps {
		assert.NotContains(t, s.CommandJSON(), `"createIndexes":"messages","indexes":[{"key":{"a":1,"_id":1},"name":"shardkey"`,
			"_id needs no shard key index")
	}

	var zones []string
	for _, s := range stepsOf(steps, "addShardToZone") {
		zones = append(zones, s.CommandJSON())
	}
	assert.Equal(t, []string{
		`{"addShardToZone":"rs-hot-1","zone":"hot"}`,
		`{"addShardToZone":"rs-hot-2","zone":"hot"}`,
		`{"addShardToZone":"rs-cold","zone":"cold"}`,
	}, zones)

	clear := stepsOf(steps, "find")
	require.Len(t, clear, 1)
	assert.Equal(t, StepClearZones, clear[0].Kind)
	assert.Equal(t, "config", clear[0].Database)
	assert.Equal(t, `{"find":"tags","filter":{"ns":"herald.messages","tag":{"$in":["hot","cold"]}}}`, clear[0].CommandJSON())

	// 30 days before now, rounded down to midnight UTC.
	cutoff := time.Date(2025, 5, 31, 0, 0, 0, 0, time.UTC)
	at := idAt(cutoff).Hex()
	ranges := stepsOf(steps, "updateZoneKeyRange")
	require.Len(t, ranges, 2)
	assert.Equal(t, `{"updateZoneKeyRange":"herald.messages","min":{"_id":{"$minKey":1}},"max":{"_id":{"$oid":"`+at+`"}},"zone":"cold"}`, ranges[0].CommandJSON())
	assert.Equal(t, `{"updateZoneKeyRange":"herald.messages","min":{"_id":{"$oid":"`+at+`"}},"max":{"_id":{"$maxKey":1}},"zone":"hot"}`, ranges[1].CommandJSON())
	assert.Contains(t, ranges[0].Description, "2025-05-31")

	// Zones get shards before ranges, old ranges go before new ones.
	idx := func(s Step) int {
		for i := range steps {
			if steps[i].CommandJSON() == s.CommandJSON() {
				return i
			}
		}
		return -1
	}
	assert.Less(t, idx(stepsOf(steps, "addShardToZone")[2]), idx(clear[0]))
	assert.Less(t, idx(clear[0]), idx(ranges[0]))
	assert.Less(t, idx(messages), idx(ranges[0]))

	t.Run("OKDefaultColdAfter", func(t *testing.T) {
		steps := Plan(SetupOptions{Sharded: true, TimeZones: true, Now: func() time.Time { return now }})
		r := stepsOf(steps, "updateZoneKeyRange")
		require.Len(t, r, 2)
		assert.Contains(t, r[0].CommandJSON(), idAt(time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)).Hex(), "90 days")
		assert.Empty(t, stepsOf(steps, "addShardToZone"), "a later run may leave zone membership as it is")
	})
}

// TestIDAt checks the cutoff against Herald's own IDs: every message made
// before the cutoff sorts below it, every one made at or after it does not.
func TestIDAt(t *testing.T) {
	cutoff := time.Date(2025, 5, 31, 0, 0, 0, 0, time.UTC)
	at := store.ID(idAt(cutoff))
	assert.Equal(t, cutoff, at.Time().UTC())
	// store.NewID never goes back in time, so build IDs the way it does:
	// the milliseconds, then 6 bytes of node and counter.
	idMade := func(t time.Time, rest byte) store.ID {
		id := store.ID(idAt(t))
		for i := 6; i < len(id); i++ {
			id[i] = rest
		}
		return id
	}
	assert.Equal(t, -1, idMade(cutoff.Add(-time.Millisecond), 0xff).Compare(at), "the last ID before the cutoff")
	assert.Equal(t, 0, idMade(cutoff, 0).Compare(at), "the first ID at the cutoff")
	assert.Equal(t, 1, idMade(cutoff, 1).Compare(at))
	id := store.NewID(time.Now())
	at2 := idAt(id.Time())
	assert.Equal(t, id[:6], at2[:6], "the same layout as store.NewID")
	assert.NotEqual(t, primitive.NewObjectIDFromTimestamp(cutoff), idAt(cutoff), "not the driver's seconds layout")
}

func TestApply(t *testing.T) {
	t.Run("OKIndexesOnLungo", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		ctx := context.Background()
		sharded, err := IsSharded(ctx, client)
		require.NoError(t, err)
		assert.False(t, sharded)

		steps := Plan(SetupOptions{})
		var out bytes.Buffer
		require.NoError(t, Apply(ctx, client, "herald", steps, &out))
		require.NoError(t, Apply(ctx, client, "herald", steps, &out), "running again is a no-op")
		assert.Equal(t, 2*len(steps), strings.Count(out.String(), "    ok: index "), out.String())

		for _, ix := range indexes {
			cur, err := client.Database("herald").Collection(ix.coll).Indexes().List(ctx)
			require.NoError(t, err)
			var specs []struct{ Name string }
			require.NoError(t, cur.All(ctx, &specs))
			var names []string
			for _, s := range specs {
				names = append(names, s.Name)
			}
			assert.Contains(t, names, *ix.model.Options.Name, "index %s.%s", ix.coll, *ix.model.Options.Name)
		}
	})

	t.Run("ErrCommandsOnLungo", func(t *testing.T) {
		// Nothing runs when a step cannot: lungo has no RunCommand.
		client, _ := newEngine(t, lungo.Options{})
		var out bytes.Buffer
		err := Apply(context.Background(), client, "herald", Plan(SetupOptions{Sharded: true}), &out)
		assert.ErrorContains(t, err, "lungo's engine runs no commands")
		assert.Empty(t, out.String())
		names, err := client.Database("herald").ListCollectionNames(context.Background(), bson.D{})
		require.NoError(t, err)
		assert.Empty(t, names, "no index was created")
	})

	t.Run("ErrOtherDatabase", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		err := Apply(context.Background(), client, "other", Plan(SetupOptions{}), &bytes.Buffer{})
		assert.ErrorContains(t, err, "plans database herald, not other")
	})
}
