package main

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/server/internal/servertest"
	"herald/store/service"
)

func TestParseConfig(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name    string
		args    []string
		env     func(string) string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{
			name: "Defaults",
			env:  servertest.Env(),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "127.0.0.1:8080", c.Addr)
				assert.Equal(t, "./herald-data", c.DataDir)
				assert.Equal(t, slog.LevelInfo, c.LogLevel)
				assert.Equal(t, "json", c.LogFormat)
				assert.Empty(t, c.AllowedOrigins)
				assert.Equal(t, 24*time.Hour, c.TokenTTL)
				assert.Equal(t, int64(1<<20), c.MaxBodyBytes)
				assert.True(t, c.Introspection)
				assert.Positive(t, c.ComplexityLimit)
				assert.Positive(t, c.MaxDepth)
				assert.Nil(t, c.TokenSecret, "no env secret means the secret file is used")
				assert.Empty(t, c.MongoURI, "the embedded store by default")
				assert.Equal(t, "herald", c.MongoDatabase)
				assert.Zero(t, c.MongoPoolSize)
				assert.Equal(t, 10*time.Second, c.MongoTimeout)
				assert.Equal(t, "majority", c.MongoWriteConcern)
				assert.Equal(t, service.StrategyBucket, c.Fanout)
				assert.Equal(t, 10_000, c.CelebrityThreshold)
				assert.Equal(t, 30*24*time.Hour, c.InactiveAfter)
				assert.Equal(t, 50, c.InboxCap)
				assert.Equal(t, 24*time.Hour, c.CacheTTL)
				assert.Equal(t, 50, c.FollowBackfill)
				assert.Equal(t, 1, c.FanoutLanes)
				assert.Equal(t, 1, c.serviceOptions(nil).Lanes)
				assert.Equal(t, 30*time.Second, c.FanoutMaxLag)
				assert.Equal(t, 30*time.Second, c.serviceOptions(nil).FanoutMaxLag)
				assert.Equal(t, 10, c.MaxBatch)
				assert.Equal(t, graph.Rate{Count: 60, Per: time.Minute, Burst: 20}, c.RateLimitUser)
				assert.Equal(t, graph.Rate{Count: 300, Per: time.Minute, Burst: 60}, c.RateLimitAddress)
				assert.Empty(t, c.TrustedProxies)
			},
		},
		{
			name: "Hardening",
			args: []string{"-max-batch", "0", "-rate-limit-user", "10/s", "-trusted-proxies", "10.0.0.0/8, 192.0.2.7"},
			env:  servertest.Env("HERALD_RATE_LIMIT_ADDRESS", "off", "HERALD_RATE_LIMIT_USER", "1/h", "HERALD_MAX_BATCH", "5"),
			check: func(t *testing.T, c config) {
				assert.Zero(t, c.MaxBatch)
				assert.Equal(t, graph.Rate{Count: 10, Per: time.Second, Burst: 10}, c.RateLimitUser)
				assert.True(t, c.RateLimitAddress.Off())
				assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}, c.TrustedProxies)
			},
		},
		{
			name: "Timelines",
			args: []string{"-fanout", "hybrid", "-celebrity-threshold", "500", "-inbox-cap", "200", "-fanout-lanes", "4"},
			env:  servertest.Env("HERALD_INACTIVE_AFTER", "168h", "HERALD_FOLLOW_BACKFILL", "0", "HERALD_FANOUT_MAX_LAG", "0"),
			check: func(t *testing.T, c config) {
				assert.Zero(t, c.serviceOptions(nil).FanoutMaxLag, "0 disables it")
				assert.Equal(t, service.StrategyHybrid, c.Fanout)
				assert.Equal(t, 500, c.CelebrityThreshold)
				assert.Equal(t, 200, c.InboxCap)
				assert.Equal(t, 7*24*time.Hour, c.InactiveAfter)
				opts := c.serviceOptions(nil)
				assert.Equal(t, -1, opts.FollowBackfill, "0 means no backfill, which service.Options spells -1")
				assert.Equal(t, service.StrategyHybrid, opts.Strategy)
				assert.Equal(t, 4, opts.Lanes)
			},
		},
		{
			name: "MongoEnv",
			env: servertest.Env(
				"HERALD_MONGODB_URI", "mongodb://user:pw@db1:27017,db2:27017/?replicaSet=rs0", "HERALD_MONGODB_DATABASE", "social",
				"HERALD_MONGODB_POOL_SIZE", "50", "HERALD_MONGODB_TIMEOUT", "3s", "HERALD_MONGODB_WRITE_CONCERN", "2",
			),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "mongodb://user:pw@db1:27017,db2:27017/?replicaSet=rs0", c.MongoURI)
				assert.Equal(t, "social", c.MongoDatabase)
				assert.Equal(t, uint64(50), c.MongoPoolSize)
				assert.Equal(t, 3*time.Second, c.MongoTimeout)
				assert.Equal(t, "2", c.MongoWriteConcern)
			},
		},
		{
			name: "MongoDatabaseFromURI",
			args: []string{"-mongodb-uri", "mongodb://db1,db2/social?replicaSet=rs0"},
			env:  servertest.Env(),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "social", c.MongoDatabase, "the URI's database, as MongoDB's tools take it")
			},
		},
		{
			name: "MongoDatabaseOverridesURI",
			args: []string{"-mongodb-uri", "mongodb://db/social", "-mongodb-database", "h2"},
			env:  servertest.Env(),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "h2", c.MongoDatabase)
			},
		},
		{
			name: "MongoFlags",
			args: []string{"-mongodb-uri", "mongodb+srv://cluster.example.net", "-mongodb-database", "h2", "-mongodb-pool-size", "8",
				"-mongodb-timeout", "500ms", "-mongodb-write-concern", "majority", "-mongodb-events", "poll", "-mongodb-poll-interval", "1s"},
			env: servertest.Env("HERALD_MONGODB_URI", "mongodb://ignored", "HERALD_MONGODB_DATABASE", "ignored"),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "mongodb+srv://cluster.example.net", c.MongoURI)
				assert.Equal(t, "h2", c.MongoDatabase)
				assert.Equal(t, uint64(8), c.MongoPoolSize)
				assert.Equal(t, 500*time.Millisecond, c.MongoTimeout)
				assert.Equal(t, "majority", c.MongoWriteConcern)
				assert.Equal(t, "poll", c.MongoEvents)
				assert.Equal(t, time.Second, c.MongoPollInterval)
			},
		},
		{
			name:  "MongoFlagsUncheckedWithoutURI",
			args:  []string{"-mongodb-write-concern", "0"},
			env:   servertest.Env(),
			check: func(t *testing.T, c config) { assert.Empty(t, c.MongoURI) },
		},
		{
			name: "Env",
			env: servertest.Env(
				"HERALD_ADDR", ":9000", "HERALD_DATA", "/var/lib/herald", "HERALD_LOG_LEVEL", "DEBUG",
				"HERALD_ALLOWED_ORIGINS", "https://a.example, https://b.example:8443",
				"HERALD_TOKEN_TTL", "1h", "HERALD_MAX_BODY_BYTES", "2048", "HERALD_INTROSPECTION", "false",
				"HERALD_COMPLEXITY_LIMIT", "50", "HERALD_MAX_DEPTH", "5", "HERALD_TOKEN_SECRET", secret,
			),
			check: func(t *testing.T, c config) {
				assert.Equal(t, ":9000", c.Addr)
				assert.Equal(t, "/var/lib/herald", c.DataDir)
				assert.Equal(t, slog.LevelDebug, c.LogLevel)
				assert.Equal(t, []string{"https://a.example", "https://b.example:8443"}, c.AllowedOrigins)
				assert.Equal(t, time.Hour, c.TokenTTL)
				assert.Equal(t, int64(2048), c.MaxBodyBytes)
				assert.False(t, c.Introspection)
				assert.Equal(t, 50, c.ComplexityLimit)
				assert.Equal(t, 5, c.MaxDepth)
				assert.Equal(t, []byte(secret), c.TokenSecret)
			},
		},
		{
			name: "FlagBeatsEnv",
			args: []string{"-addr", "127.0.0.1:0", "-log-level", "warn", "-introspection=true", "-max-depth", "7"},
			env:  servertest.Env("HERALD_ADDR", ":9000", "HERALD_LOG_LEVEL", "debug", "HERALD_INTROSPECTION", "false", "HERALD_MAX_DEPTH", "3", "HERALD_DATA", "/d"),
			check: func(t *testing.T, c config) {
				assert.Equal(t, "127.0.0.1:0", c.Addr)
				assert.Equal(t, slog.LevelWarn, c.LogLevel)
				assert.True(t, c.Introspection)
				assert.Equal(t, 7, c.MaxDepth)
				assert.Equal(t, "/d", c.DataDir, "env still fills flags not given")
			},
		},
		{name: "ErrBadLogLevel", args: []string{"-log-level", "verbose"}, env: servertest.Env(), wantErr: `invalid log level "verbose"`},
		{name: "ErrBadLogLevelEnv", env: servertest.Env("HERALD_LOG_LEVEL", "trace"), wantErr: `invalid log level "trace"`},
		{name: "ErrBadLogFormat", args: []string{"-log-format", "xml"}, env: servertest.Env(), wantErr: `invalid log format "xml"`},
		{name: "ErrShortSecret", env: servertest.Env("HERALD_TOKEN_SECRET", "too-short"), wantErr: "HERALD_TOKEN_SECRET is 9 bytes; it must be at least 32"},
		{name: "ErrBadEnvValue", env: servertest.Env("HERALD_MAX_BODY_BYTES", "lots"), wantErr: `invalid HERALD_MAX_BODY_BYTES="lots"`},
		{name: "ErrBadDuration", args: []string{"-token-ttl", "forever"}, env: servertest.Env(), wantErr: "invalid value"},
		{name: "ErrNegativeBody", args: []string{"-max-body-bytes", "-1"}, env: servertest.Env(), wantErr: "-max-body-bytes must be positive"},
		{name: "ErrZeroTTL", args: []string{"-token-ttl", "0s"}, env: servertest.Env(), wantErr: "-token-ttl must be positive"},
		{name: "ErrUnknownFlag", args: []string{"-port", "80"}, env: servertest.Env(), wantErr: "flag provided but not defined: -port"},
		{name: "ErrArgument", args: []string{"serve"}, env: servertest.Env(), wantErr: `unexpected argument "serve"`},
		{name: "ErrMongoScheme", args: []string{"-mongodb-uri", "http://user:secret@db"}, env: servertest.Env(), wantErr: "-mongodb-uri must start with mongodb:// or mongodb+srv://"},
		{name: "ErrMongoDatabase", args: []string{"-mongodb-uri", "mongodb://db", "-mongodb-database", "my.db"}, env: servertest.Env(), wantErr: `-mongodb-database: invalid database name "my.db"`},
		{name: "ErrMongoDatabaseEmpty", env: servertest.Env("HERALD_MONGODB_URI", "mongodb://db", "HERALD_MONGODB_DATABASE", ""), args: []string{"-mongodb-database="}, wantErr: "invalid database name"},
		{name: "ErrMongoTimeout", args: []string{"-mongodb-uri", "mongodb://db", "-mongodb-timeout", "0s"}, env: servertest.Env(), wantErr: "-mongodb-timeout must be positive"},
		{name: "ErrMongoWriteConcernZero", args: []string{"-mongodb-uri", "mongodb://db", "-mongodb-write-concern", "0"}, env: servertest.Env(), wantErr: "-mongodb-write-concern: \"0\": want majority or a number of nodes, at least 1"},
		{name: "ErrMongoEvents", args: []string{"-mongodb-uri", "mongodb://db", "-mongodb-events", "tail"}, env: servertest.Env(), wantErr: "-mongodb-events must be auto, poll, changestream or local"},
		{name: "ErrMongoPollInterval", args: []string{"-mongodb-uri", "mongodb://db", "-mongodb-poll-interval", "0s"}, env: servertest.Env(), wantErr: "-mongodb-poll-interval must be positive"},
		{name: "ErrMongoWriteConcernWord", env: servertest.Env("HERALD_MONGODB_URI", "mongodb://db", "HERALD_MONGODB_WRITE_CONCERN", "all"), wantErr: "-mongodb-write-concern"},
		{name: "ErrMongoPoolSize", args: []string{"-mongodb-pool-size", "-1"}, env: servertest.Env(), wantErr: "invalid value"},
		{name: "ErrFanout", args: []string{"-fanout", "push"}, env: servertest.Env(), wantErr: `unknown fan-out strategy "push"`},
		{name: "ErrFanoutEnv", env: servertest.Env("HERALD_FANOUT", "Bucket"), wantErr: `unknown fan-out strategy "Bucket"`},
		{name: "ErrInboxCap", args: []string{"-inbox-cap", "0"}, env: servertest.Env(), wantErr: "-inbox-cap 1 to 1000"},
		{name: "ErrFanoutLanes", args: []string{"-fanout-lanes", "0"}, env: servertest.Env(), wantErr: "-fanout-lanes 0: 1 to 64"},
		{name: "ErrInactiveAfter", args: []string{"-inactive-after", "30m"}, env: servertest.Env(), wantErr: "-inactive-after must be at least 1h0m0s"},
		{name: "ErrFanoutMaxLag", args: []string{"-fanout-max-lag", "-1s"}, env: servertest.Env(), wantErr: "-fanout-max-lag must not be negative"},
		{name: "ErrCacheTTL", args: []string{"-cache-ttl", "0s"}, env: servertest.Env(), wantErr: "-cache-ttl must be positive"},
		{name: "ErrRateLimitUser", args: []string{"-rate-limit-user", "60/d"}, env: servertest.Env(), wantErr: `-rate-limit-user: invalid rate "60/d"`},
		{name: "ErrRateLimitAddressEnv", env: servertest.Env("HERALD_RATE_LIMIT_ADDRESS", "lots"), wantErr: `-rate-limit-address: invalid rate "lots"`},
		{name: "ErrTrustedProxies", args: []string{"-trusted-proxies", "10.0.0.0/33"}, env: servertest.Env(), wantErr: `-trusted-proxies: invalid prefix "10.0.0.0/33"`},
		{name: "ErrMaxBatch", args: []string{"-max-batch", "-1"}, env: servertest.Env(), wantErr: "-max-batch must not be negative"},
		{name: "ErrBadOrigin", args: []string{"-allowed-origins", "example.com"}, env: servertest.Env(), wantErr: `invalid origin "example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env, &bytes.Buffer{})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestParseConfig_Help(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"-h"}, servertest.Env(), &out)
	assert.True(t, errors.Is(err, flag.ErrHelp))
	assert.Contains(t, out.String(), "-allowed-origins")
	assert.Contains(t, out.String(), "(default \"60/m,burst=20\")", "-rate-limit-user's default")
	assert.Contains(t, out.String(), "HERALD_TOKEN_SECRET")
	assert.Contains(t, out.String(), "-mongodb-uri")
	assert.Contains(t, out.String(), "herald mongo setup")
}

// TestParseConfig_MongoURINotEchoed: a URI may hold a password, so an
// error about it must not repeat it.
func TestParseConfig_MongoURINotEchoed(t *testing.T) {
	_, err := parseConfig([]string{"-mongodb-uri", "mongo://admin:hunter2@db"}, servertest.Env(), &bytes.Buffer{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}
