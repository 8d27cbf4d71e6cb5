package mongostore

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Where the server has no change streams (a standalone mongod, several
// MongoDB-compatible services), each process polls the events collection
// instead, reading documents in the order of their sequence number q.
//
// Numbers come from one counter document (eventseq), which every
// publisher in a polling process increments before it inserts ($inc, so no
// two documents share a number, and the unique index on q makes sure of
// it). A change stream's process numbers nothing (Events.numbers): all
// processes must read the same way, as EventsAuto gives them against one
// server, and a poller that finds documents without numbers says so
// (checkUnnumbered). A publisher can
// take its number and insert after another publisher that took a later
// number inserted: a poller that had gone past the later one would miss
// it. So a poller never goes past a missing number. It delivers documents
// strictly one number after the other; when the next number is missing
// though later ones are there, its publisher is still writing, and the
// poller waits. A publisher gives up after PublishTimeout, so after
// GapGrace (longer) the poller inserts a placeholder with no events under
// the missing number, and goes on. The unique index decides between the
// placeholder and a publisher later still: whichever is inserted first
// holds the number, in every process, and the other insert fails (the
// publisher logs its events as not published, as for any failed publish).
// Every poller therefore reads the same documents in the same order, so a
// subscription's cursor (a position: document id and index) resumes in any
// process as with change streams, and no event a publisher was told is
// published is missed or delivered twice.
//
// Documents expire (TTL): a poller away (failing) for long may find the
// documents after its position gone. It cannot tell an expired number from
// a slow publisher's, so a poller whose last read is older than half the
// TTL and which does not find the next number treats the history as lost,
// as a change stream does: it empties the hub's logs (resuming cursors get
// RESUME_EXPIRED) and starts from now.

// seqID is the counter document's id in eventseq.
const seqID = "events"

// pollBatch bounds the documents one poll reads; a full batch is followed
// by another read at once.
const pollBatch = 64

// takeSeq takes n numbers from the counter and returns the last one.
func (e *Events) takeSeq(ctx context.Context, n int64) (int64, error) {
	var c struct {
		N int64 `bson:"n"`
	}
	err := e.seq.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: seqID}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: n}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c)
	return c.N, err
}

// startPoll makes sure of the unique index on q, which the poller's
// placeholders rely on, and returns the last number taken: a poller starts
// after it, from now.
func (e *Events) startPoll(ctx context.Context) (int64, error) {
	_, err := e.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "q", Value: 1}},
		Options: options.Index().SetName("seq").SetUnique(true).
			SetPartialFilterExpression(bson.D{{Key: "q", Value: bson.D{{Key: "$exists", Value: true}}}}),
	})
	if err != nil {
		return 0, err
	}
	return e.lastSeq(ctx)
}

// lastSeq returns the last number taken, 0 before the first.
func (e *Events) lastSeq(ctx context.Context) (int64, error) {
	var c struct {
		N int64 `bson:"n"`
	}
	err := e.seq.FindOne(ctx, bson.D{{Key: "_id", Value: seqID}}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return c.N, err
}

// poll feeds the hub from the events collection, in number order after
// last, until ctx ends.
func (e *Events) poll(ctx context.Context, last int64) {
	var (
		lastOK     = time.Now() // start of the last successful read
		gapSince   time.Time    // when the missing next number was first seen missing
		failures   int
		lastLog    time.Time
		suppressed int
		backoff    time.Duration
	)
	const logEvery = 30 * time.Second
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	// Documents without a number are looked for among those made a check
	// period after this poller began: before, a process switching from a
	// failed change stream to polling, as this one may just have, may
	// still publish without.
	unnumberedAfter := time.Now().Add(e.unnumberedEvery)
	nextCheck, reported := unnumberedAfter, false
	for {
		if e.testHookPoll != nil {
			e.testHookPoll()
		}
		start := time.Now()
		if !reported && !start.Before(nextCheck) {
			reported = e.checkUnnumbered(ctx, unnumberedAfter)
			nextCheck = start.Add(e.unnumberedEvery)
		}
		more, err := e.pollOnce(ctx, &last, &gapSince, start.Sub(lastOK))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if failures == 1 || time.Since(lastLog) >= logEvery {
				e.log.Warn("reading inbox events failed; retrying", "err", err, "failures", failures, "suppressed", suppressed)
				lastLog, suppressed = time.Now(), 0
			} else {
				suppressed++
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), e.opts.MaxBackoff)
			if !wait(backoff) {
				return
			}
			continue
		}
		if failures > 0 {
			e.log.Info("reading inbox events again", "failures", failures)
		}
		lastOK, failures, backoff = start, 0, 0
		if !more && !wait(e.opts.PollInterval) {
			return
		}
	}
}

// pollOnce reads the documents after *last and delivers those that follow
// it without a gap, advancing *last. It reports whether to read again at
// once (a full batch, or a gap just filled). away is how long since the
// last successful read began.
func (e *Events) pollOnce(ctx context.Context, last *int64, gapSince *time.Time, away time.Duration) (bool, error) {
	cur, err := e.coll.Find(ctx, bson.D{{Key: "q", Value: bson.D{{Key: "$gt", Value: *last}}}},
		options.Find().SetSort(bson.D{{Key: "q", Value: 1}}).SetLimit(pollBatch))
	if err != nil {
		return false, err
	}
	var docs []eventsDoc
	if err := cur.All(ctx, &docs); err != nil {
		return false, err
	}
	if away >= e.opts.TTL/2 && (len(docs) == 0 || docs[0].Seq != *last+1) {
		// Away long enough for the next documents to have expired: unless
		// no number was taken since, some may be gone (and all of them,
		// when nothing is found).
		now, err := e.lastSeq(ctx)
		if err != nil {
			return false, err
		}
		if now == *last {
			return false, nil
		}
		e.log.Error("inbox event polling cannot resume: events may have expired while it was away; starting from now",
			"away", away.String(), "after", *last, "last_taken", now)
		e.hub.ForgetLogs()
		*last, *gapSince = now, time.Time{}
		return true, nil
	}
	for _, d := range docs {
		if d.Seq != *last+1 {
			// A number taken and not written yet: its publisher may still
			// be writing, or may have died.
			if gapSince.IsZero() {
				*gapSince = time.Now()
			}
			if time.Since(*gapSince) < e.opts.GapGrace {
				return false, nil
			}
			filled, err := e.fillGap(ctx, *last+1)
			if err != nil {
				return false, err
			}
			if filled {
				*last++
			}
			return true, nil
		}
		e.deliver(ctx, d)
		*last, *gapSince = d.Seq, time.Time{}
	}
	return len(docs) == pollBatch, nil
}

// unnumberedSample is how many of the newest documents checkUnnumbered
// reads: enough to catch a process publishing without numbers whenever it
// publishes at all, and a bounded read whatever the traffic.
const unnumberedSample = 32

// checkUnnumbered looks among the newest documents (by _id, through its
// index) for one made after since that has no number: a process
// publishing without numbering (forced to change streams, or a Herald from
// before polling), whose events pollers never read. It logs that once, at
// ERROR, and reports whether it did. A failed read is left to the next
// check: polling goes on either way.
func (e *Events) checkUnnumbered(ctx context.Context, since time.Time) bool {
	// The smallest id of since's second: NewObjectIDFromTimestamp fills
	// the rest as for a new id, greater than ids drawn before in that
	// second.
	var after primitive.ObjectID
	binary.BigEndian.PutUint32(after[:4], uint32(since.Unix()))
	cur, err := e.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(unnumberedSample).SetProjection(bson.D{{Key: "q", Value: 1}}))
	if err != nil {
		return false
	}
	var docs []struct {
		ID  primitive.ObjectID `bson:"_id"`
		Seq int64              `bson:"q"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return false
	}
	for _, d := range docs {
		if d.Seq == 0 {
			e.log.Error("another process publishes inbox events without numbering them, so pollers never deliver them: run every process on this database with -mongodb-events poll (or all with auto against one server)",
				"doc", d.ID.Hex())
			return true
		}
	}
	return false
}

// fillGap inserts a placeholder, with no events, under number seq, which
// a publisher took but did not write within GapGrace. It reports false if
// the publisher's document got there first (it is read next).
func (e *Events) fillGap(ctx context.Context, seq int64) (bool, error) {
	_, err := e.coll.InsertOne(ctx, eventsDoc{ID: primitive.NewObjectID(), Seq: seq, Expires: e.opts.Now().Add(e.opts.TTL), Events: []eventDoc{}})
	if isDuplicate(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.log.Warn("an inbox events document was never written (its publisher failed or was too slow); skipped", "seq", seq)
	return true, nil
}

// noChangeStreams reports an error saying the server has no change streams:
// CommandNotSupported (115), a standalone's "only supported on replica
// sets" (40573), an unknown $changeStream stage (40324), or the words.
func noChangeStreams(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 115 || ce.Code == 40573 || ce.Code == 40324) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) && (se.HasErrorCode(115) || se.HasErrorCode(40573) || se.HasErrorCode(40324)) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "not supported") || strings.Contains(msg, "only supported on replica sets")
}
