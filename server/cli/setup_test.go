package cli

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dryRun runs `herald mongo setup -dry-run` with args and returns what it
// printed.
func dryRun(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	// No URI, or one nobody listens on: a dry run must not connect.
	require.NoError(t, Mongo(context.Background(), append([]string{"setup", "-dry-run"}, args...), servertest.Env(), &out, io.Discard))
	return out.String()
}

// indexLines are the index steps Herald always plans, with their reasons
// from schema.go (spot-checked; TestPlan_Indexes checks them all).
var indexLines = []string{
	`index users.attributes {"at.k":1,"at.v":1,"_id":1}: usersByAttribute`,
	`index followers.edge {"u":1,"o":1}: one edge per pair; lists u's followers in o order, covered, for fan-out`,
	`index messages.outbox {"a":1,"_id":-1}: an author's messages newest first`,
	`index messages.repostsOf {"ro":1,"_id":-1}: a message's reposts newest first (ListReposts`,
	`index buckets.bucket {"o":1,"k":1}: one document per (owner, first message)`,
	`index entries.entry {"o":1,"m":1}: one entry per (owner, message)`,
	`index caches.expiry {"x":1}: idle users' cached inboxes expire`,
	`index events.expiry {"x":1}: events expire`,
	`index blocks.relation {"u":1,"o":1,"rk":1}: one block or mute per (user, target, kind)`,
	`index blocks.blockers {"o":1,"rk":1,"u":1}: who blocks a reader, covered (ListBlockers)`,
	`index notifactors.byactor {"o":1,"u":1}: one actor's groups in one feed`,
	`index users.deleted {"dl":1,"_id":1}: deleted accounts not yet purged`,
	`index followreqs.request {"o":1,"u":1}: one request per (private account, user)`,
	`index dms.history {"c":1,"s":1}: a conversation's messages by seq`,
	`index userconvs.list {"u":1,"lt":-1}: a user's conversations, most recently active first`,
	`herald> db.runCommand({"createIndexes":"buckets","indexes":[{"key":{"o":1,"k":1},"name":"bucket","unique":true}]})`,
	`herald> db.runCommand({"createIndexes":"events","indexes":[{"key":{"x":1},"name":"expiry","expireAfterSeconds":0}]})`,
}

func TestMongoSetup_DryRun(t *testing.T) {
	t.Run("OKNotSharded", func(t *testing.T) {
		out := dryRun(t, "-sharded", "no")
		assert.Contains(t, out, "nothing is run")
		for _, l := range indexLines {
			assert.Contains(t, out, l)
		}
		assert.Equal(t, 41, strings.Count(out, `db.runCommand({"createIndexes"`), out)
		assert.NotContains(t, out, "dms.sender", "the optional index only when asked for")
		assert.NotContains(t, out, "shardCollection")
		assert.NotContains(t, out, "enableSharding")
	})

	t.Run("OKDMSenderIndex", func(t *testing.T) {
		out := dryRun(t, "-sharded", "no", "-dm-sender-index")
		assert.Contains(t, out, `index dms.sender {"a":1,"_id":-1}: optional: the conversation messages a user sent`)
		assert.Equal(t, 42, strings.Count(out, `db.runCommand({"createIndexes"`), out)
	})

	t.Run("OKSharded", func(t *testing.T) {
		out := dryRun(t, "-sharded", "yes", "-database", "social")
		assert.Contains(t, out, "steps for database social")
		assert.Contains(t, out, `admin> db.runCommand({"enableSharding":"social"})`)
		for _, l := range []string{
			`shard users on {"_id":"hashed"}: every user read and write names the user`,
			`admin> db.runCommand({"shardCollection":"social.users","key":{"_id":"hashed"}})`,
			`admin> db.runCommand({"shardCollection":"social.handles","key":{"_id":1}})`,
			`admin> db.runCommand({"shardCollection":"social.followees","key":{"u":1,"o":1}})`,
			`admin> db.runCommand({"shardCollection":"social.followers","key":{"u":1,"o":1}})`,
			`admin> db.runCommand({"shardCollection":"social.messages","key":{"a":1,"_id":1}})`,
			`admin> db.runCommand({"shardCollection":"social.buckets","key":{"o":1,"k":1}})`,
			`admin> db.runCommand({"shardCollection":"social.entries","key":{"o":1,"m":1}})`,
			`admin> db.runCommand({"shardCollection":"social.caches","key":{"_id":"hashed"}})`,
			`admin> db.runCommand({"shardCollection":"social.deliveries","key":{"m":1,"k":1}})`,
			`admin> db.runCommand({"shardCollection":"social.likes","key":{"u":1,"m":1}})`,
			`admin> db.runCommand({"shardCollection":"social.reposts","key":{"u":1,"o":1}})`,
			`admin> db.runCommand({"shardCollection":"social.blocks","key":{"u":1,"o":1}})`,
			`admin> db.runCommand({"shardCollection":"social.followreqs","key":{"o":1,"u":1}})`,
			`admin> db.runCommand({"shardCollection":"social.notifications","key":{"o":1,"k":1}})`,
			`admin> db.runCommand({"shardCollection":"social.notifactors","key":{"g":1,"u":1}})`,
			`admin> db.runCommand({"shardCollection":"social.notifheads","key":{"_id":"hashed"}})`,
			`admin> db.runCommand({"shardCollection":"social.convs","key":{"_id":"hashed"}})`,
			`admin> db.runCommand({"shardCollection":"social.dms","key":{"c":1,"s":1}})`,
			`admin> db.runCommand({"shardCollection":"social.userconvs","key":{"u":1,"c":1}})`,
			`admin> db.runCommand({"shardCollection":"social.dmreads","key":{"_id":"hashed"}})`,
			`social> db.runCommand({"createIndexes":"messages","indexes":[{"key":{"a":1,"_id":1},"name":"shardkey"}]})`,
		} {
			assert.Contains(t, out, l)
		}
		assert.Equal(t, 20, strings.Count(out, `"shardCollection"`))
		assert.NotContains(t, out, "updateZoneKeyRange")
		assert.NotContains(t, out, "(if sharded)")
	})

	t.Run("OKTimeZones", func(t *testing.T) {
		out := dryRun(t, "-sharded", "yes", "-time-zones", "-cold-after", "720h", "-hot-shards", "hot-a, hot-b", "-cold-shards", "cold-c")
		for _, l := range indexLines {
			assert.Contains(t, out, l)
		}
		assert.Contains(t, out, `admin> db.runCommand({"shardCollection":"herald.messages","key":{"_id":1}})`)
		assert.NotContains(t, out, `"key":{"a":1,"_id":1}`, "messages are sharded by time instead")
		assert.Contains(t, out, `admin> db.runCommand({"addShardToZone":"hot-a","zone":"hot"})`)
		assert.Contains(t, out, `admin> db.runCommand({"addShardToZone":"hot-b","zone":"hot"})`)
		assert.Contains(t, out, `admin> db.runCommand({"addShardToZone":"cold-c","zone":"cold"})`)
		assert.Contains(t, out, `config> db.runCommand({"find":"tags","filter":{"ns":"herald.messages","tag":{"$in":["hot","cold"]}}})`)

		cutoff := time.Now().UTC().Add(-720 * time.Hour).Truncate(24 * time.Hour)
		m := regexp.MustCompile(`"max":\{"_id":\{"\$oid":"([0-9a-f]{24})"\}\},"zone":"cold"`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		assert.Contains(t, out, `{"updateZoneKeyRange":"herald.messages","min":{"_id":{"$minKey":1}},"max":{"_id":{"$oid":"`+m[1]+`"}},"zone":"cold"}`)
		assert.Contains(t, out, `{"updateZoneKeyRange":"herald.messages","min":{"_id":{"$oid":"`+m[1]+`"}},"max":{"_id":{"$maxKey":1}},"zone":"hot"}`)
		assert.Contains(t, out, "zone cold: messages created before "+cutoff.Format(time.DateOnly)+" (30 days ago")

		// Zones get their shards, and old ranges go, before new ranges come.
		assert.Less(t, strings.Index(out, `"addShardToZone":"cold-c"`), strings.Index(out, `"find":"tags"`))
		assert.Less(t, strings.Index(out, `"find":"tags"`), strings.Index(out, `"updateZoneKeyRange"`))
		assert.Less(t, strings.Index(out, `"shardCollection":"herald.messages"`), strings.Index(out, `"updateZoneKeyRange"`))
	})

	t.Run("OKAuto", func(t *testing.T) {
		out := dryRun(t, "-mongodb-uri", "mongodb://127.0.0.1:1")
		assert.Contains(t, out, "-sharded auto")
		assert.Contains(t, out, `(if sharded) shard users on {"_id":"hashed"}`)
		assert.NotContains(t, out, "(if sharded) index users.attributes")
	})
}

func TestMongoSetup_Errors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"ErrNoCommand", []string{"mongo"}, "usage: herald mongo setup"},
		{"ErrUnknownCommand", []string{"mongo", "drop"}, "usage: herald mongo setup"},
		{"ErrNoURI", []string{"mongo", "setup"}, "-mongodb-uri (or HERALD_MONGODB_URI) is required"},
		{"ErrSharded", []string{"mongo", "setup", "-dry-run", "-sharded", "maybe"}, `invalid -sharded "maybe"`},
		{"ErrZonesUnsharded", []string{"mongo", "setup", "-dry-run", "-sharded", "no", "-time-zones"}, "-time-zones needs a sharded cluster"},
		{"ErrShardsWithoutZones", []string{"mongo", "setup", "-dry-run", "-hot-shards", "a"}, "need -time-zones"},
		{"ErrShardInBoth", []string{"mongo", "setup", "-dry-run", "-time-zones", "-hot-shards", "a,b", "-cold-shards", "b"}, `shard "b" is in both`},
		{"ErrColdAfter", []string{"mongo", "setup", "-dry-run", "-time-zones", "-cold-after", "1h"}, "-cold-after must be at least 24h"},
		{"ErrDatabase", []string{"mongo", "setup", "-dry-run", "-database", "a b"}, "invalid database name"},
		{"ErrUnreachable", []string{"mongo", "setup", "-mongodb-uri", "mongodb://127.0.0.1:1/?connect=direct", "-timeout", "300ms"}, "mongodb does not answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Mongo(context.Background(), tt.args[1:], servertest.Env(), &out, io.Discard)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.NotContains(t, out.String(), "db.runCommand", "nothing planned or run")
		})
	}

	t.Run("OKHelp", func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, Mongo(context.Background(), []string{"setup", "-h"}, servertest.Env(), &out, io.Discard))
		assert.Contains(t, out.String(), "Usage: herald mongo setup")
		assert.Contains(t, out.String(), "-time-zones")
	})

	t.Run("OKEnvURI", func(t *testing.T) {
		cfg, err := parseSetupConfig(nil, servertest.Env("HERALD_MONGODB_URI", "mongodb://db", "HERALD_MONGODB_DATABASE", "social"), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "mongodb://db", cfg.URI)
		assert.Equal(t, "social", cfg.Database)
		assert.Equal(t, "auto", cfg.Sharded)
	})

	t.Run("DatabaseFromURI", func(t *testing.T) {
		env := servertest.Env("HERALD_MONGODB_URI", "mongodb://db/social?replicaSet=rs0")
		cfg, err := parseSetupConfig(nil, env, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "social", cfg.Database, "the URI's database is the default")
		cfg, err = parseSetupConfig([]string{"-database", "other"}, env, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "other", cfg.Database, "-database overrides it")
		cfg, err = parseSetupConfig(nil, servertest.Env("HERALD_MONGODB_URI", "mongodb://db"), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, DefaultDatabase, cfg.Database, "a URI that names none")
	})
}

func TestURIDatabase(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://db/social":          "social",
		"mongodb://db":                 DefaultDatabase,
		"mongodb://db/":                DefaultDatabase,
		"mongodb://db/?replicaSet=rs0": DefaultDatabase,
		"mongodb://u:p%2F%40w@db1:27017,db2:27018/social?w=2":       "social",
		"mongodb://user:pw@db/?authSource=admin":                    DefaultDatabase,
		"mongodb+srv://cluster.example.net/social?retryWrites=true": "social",
		"mongodb://db/my%2Ddb":                                      "my-db",
		"":                                                          DefaultDatabase,
	} {
		assert.Equal(t, want, URIDatabase(uri), uri)
	}
}
