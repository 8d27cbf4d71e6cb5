package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"herald/server/bench"
	"herald/server/cli"
)

// runBench is herald bench: the server's flags, which set the timeline
// strategy of the servers it starts, and bench's own.
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var bf bench.Flags
	cfg, err := parseCommandConfig(command{name: "herald bench", usage: bench.Usage, flags: bf.Register}, args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return bench.Run(ctx, bench.Config{
		Fanout:             cfg.Fanout,
		CelebrityThreshold: cfg.CelebrityThreshold,
		InactiveAfter:      cfg.InactiveAfter,
		InboxCap:           cfg.InboxCap,
		CacheTTL:           cfg.CacheTTL,
		FollowBackfill:     cfg.FollowBackfill,
		DataDir:            cfg.DataDir,
		TokenSecret:        cfg.TokenSecret,
		MongoURI:           cfg.MongoURI,
	}, bf, args, newLogger(cfg, stderr), stdout, stderr)
}

// runSeed is herald seed: the server's flags, which name the store and the
// timeline strategy, and seed's own.
func runSeed(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var sf cli.SeedFlags
	cfg, err := parseCommandConfig(command{name: "herald seed", usage: cli.SeedUsage, flags: sf.Register}, args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return cli.Seed(ctx, sf, cli.SeedConfig{
		DataDir:            cfg.DataDir,
		MongoURI:           cfg.MongoURI,
		MongoDatabase:      cfg.MongoDatabase,
		MongoPoolSize:      cfg.MongoPoolSize,
		MongoTimeout:       cfg.MongoTimeout,
		MongoWriteConcern:  cfg.MongoWriteConcern,
		Fanout:             cfg.Fanout,
		CelebrityThreshold: cfg.CelebrityThreshold,
	}, newLogger(cfg, stderr), stdout, stderr)
}
