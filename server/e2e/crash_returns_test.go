package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/internal/servertest"
	"herald/store"
)

// The readers of TestCrash_KillDuringRebuild coming back, over a client
// that a kill may cut off.

// returnResult is one returning reader's request.
type returnResult struct {
	reader     store.ID
	err        error // a transport error if a kill cut the request off
	rebuilding bool
	total      int
}

// postResult is the post a round sends while its readers return.
type postResult struct {
	id  store.ID // NilID unless the server answered
	err error
}

// returnRun is a batch of returning readers under way.
type returnRun struct {
	done    chan struct{}
	results []returnResult // in the order the answers came; complete after wait
	post    postResult
}

// startReturns sends one inbox request for each of readers, rebuildClients
// at a time, and, once a third of them is answered (or failed), posts text
// as poster (none if poster is NilID): a delivery job that lands among the
// rebuild jobs on the fan-out lane, racing them.
func startReturns(c *crashClient, base string, tokens map[store.ID]string, readers []store.ID, poster store.ID, text string) *returnRun {
	run := &returnRun{done: make(chan struct{})}
	var (
		mu    sync.Mutex
		next  atomic.Int64
		wg    sync.WaitGroup
		third = make(chan struct{})
		once  sync.Once
	)
	for range rebuildClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(readers) {
					return
				}
				r := returnResult{reader: readers[i]}
				var d map[string]any
				if d, r.err = c.do(base, tokens[readers[i]], inboxProbe, nil); r.err == nil {
					ib := d["inbox"].(map[string]any)
					r.rebuilding = ib["rebuilding"].(bool)
					r.total = int(ib["totalCount"].(float64))
				}
				mu.Lock()
				run.results = append(run.results, r)
				if len(run.results) >= len(readers)/3 {
					once.Do(func() { close(third) })
				}
				mu.Unlock()
			}
		})
	}
	if poster != store.NilID {
		wg.Go(func() {
			<-third
			d, err := c.do(base, tokens[poster], `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`, map[string]any{"t": text})
			if err == nil {
				var id store.ID
				if id, err = servertest.GlobalStoreID("Message", d["postMessage"].(map[string]any)["id"].(string)); err == nil {
					run.post.id = id
				}
			}
			run.post.err = err
		})
	}
	go func() {
		wg.Wait()
		close(run.done)
	}()
	return run
}

// wait returns once every request of the run has been answered or failed.
func (r *returnRun) wait() { <-r.done }

// completed returns the readers whose request was answered, in answer
// order: about the order their rebuild jobs run in.
func (r *returnRun) completed() []store.ID {
	var ids []store.ID
	for _, res := range r.results {
		if res.err == nil {
			ids = append(ids, res.reader)
		}
	}
	return ids
}

// checkReturns checks the answers of round k's returning readers and
// returns how many said their inbox was rebuilding. Each reader asked once
// and had been away, so its rebuild job was stored before its inbox was
// read: an answer of not rebuilding means the job was already done, and the
// inbox then holds at least the seeded messages.
func checkReturns(t *testing.T, k int, results []returnResult, seeded int) int {
	t.Helper()
	rebuilding := 0
	for _, r := range results {
		if r.err != nil {
			continue
		}
		if r.rebuilding {
			rebuilding++
		} else {
			assert.GreaterOrEqual(t, r.total, seeded, "round %d: reader %s answered not rebuilding with an inbox of %d", k, r.reader, r.total)
		}
	}
	return rebuilding
}

// waitRebuilt asks each of readers in turn, until deadline, until its inbox
// is no longer rebuilding. A flag once cleared stays cleared (the reader is
// active now), so one pass in any order suffices; in the order the jobs run
// it costs the fewest requests.
func waitRebuilt(t *testing.T, c *crashClient, base string, tokens map[store.ID]string, readers []store.ID, deadline time.Time) {
	t.Helper()
	for i, r := range readers {
		for {
			d, err := c.do(base, tokens[r], inboxProbe, nil)
			require.NoError(t, err, "reader %s", r)
			if !d["inbox"].(map[string]any)["rebuilding"].(bool) {
				break
			}
			require.True(t, time.Now().Before(deadline), "%d of %d readers still rebuilding at the deadline", len(readers)-i, len(readers))
			time.Sleep(rebuildPoll)
		}
	}
}

// crashClient sends GraphQL requests that a kill may cut off: unlike
// servertest.GQL, it returns transport errors instead of failing the test.
type crashClient struct{ http *http.Client }

func newCrashClient() *crashClient {
	return &crashClient{http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: rebuildClients + 1},
	}}
}

// gqlErrors is an answer with GraphQL errors: never expected, killed or not.
type gqlErrors []string

func (e gqlErrors) Error() string { return "graphql errors: " + strings.Join(e, "; ") }

// do posts a GraphQL operation to base+"/graphql" as the token's owner and
// returns the data.
func (c *crashClient) do(base, token, query string, vars map[string]any) (map[string]any, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		var ge gqlErrors
		for _, e := range out.Errors {
			ge = append(ge, e.Message)
		}
		return nil, ge
	}
	return out.Data, nil
}
