package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/datadir"
	"herald/server/internal/servertest"
	"herald/store/embedded"
	"herald/store/embedded/faultfs"
)

// withEmbeddedDisk makes the servers the test runs open their embedded
// store on disk, with a small reserve and a fast free-space check.
func withEmbeddedDisk(t *testing.T, disk *faultfs.FS) {
	t.Helper()
	editEmbeddedOptions = func(o *embedded.Options) {
		o.FS = disk
		o.ReserveBytes, o.MinFreeBytes = 1<<20, 1<<20
		o.DiskCheckEvery = 5 * time.Millisecond
	}
	t.Cleanup(func() { editEmbeddedOptions = nil })
}

// getText returns the status and body of a GET.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestStorage_DiskFull runs the server on a disk that fills up: mutations
// answer STORAGE_FULL at once, queries work, /readyz is 503 with the
// reason and the writable gauge 0; when space is back the server takes
// writes again by itself, and what it acknowledged is all there.
func TestStorage_DiskFull(t *testing.T) {
	disk := faultfs.New(vfs.Default, 1<<30)
	withEmbeddedDisk(t, disk)
	data := t.TempDir()
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", data}, servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
	base := "http://" + r.addr
	ready := func(want int) func() bool {
		return func() bool { status, _ := getText(t, base+"/readyz"); return status == want }
	}
	require.Eventually(t, ready(http.StatusOK), 10*time.Second, 5*time.Millisecond)
	alice := servertest.MustSignUp(t, base, "alice")
	servertest.MustPost(t, base, alice, "before")

	disk.SetFree(0) // another process fills the disk
	require.Eventually(t, ready(http.StatusServiceUnavailable), 10*time.Second, 5*time.Millisecond)
	_, body := getText(t, base+"/readyz")
	assert.Equal(t, "not ready: the server's disk is full: writes are refused until space is freed; reads still work\n", body)
	_, metrics := getText(t, base+"/metrics")
	assert.Contains(t, metrics, "herald_storage_writable 0")

	post := `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`
	for _, op := range []struct{ token, query string }{
		{alice.Token, post},
		{"", `mutation { signUp(input: {handle: "bob", password: "correct horse"}) { token } }`},
	} {
		start := time.Now()
		resp := servertest.GQL(t, base, op.token, op.query, map[string]any{"t": "during"})
		assert.Equal(t, "STORAGE_FULL", resp.Code(), "%s: %+v", op.query, resp)
		require.NotEmpty(t, resp.Errors)
		assert.Contains(t, resp.Errors[0].Message, "disk is full")
		assert.Less(t, time.Since(start), 5*time.Second, "refused at once")
	}
	// Reads work.
	d := servertest.MustGQL(t, base, alice.Token, `{ viewer { handle messages(first: 10) { edges { node { text } } } } }`, nil)
	assert.Contains(t, d["viewer"].(map[string]any)["messages"].(map[string]any)["edges"], map[string]any{"node": map[string]any{"text": "before"}})

	disk.SetFree(1 << 30) // space is back
	require.Eventually(t, ready(http.StatusOK), 10*time.Second, 5*time.Millisecond)
	_, metrics = getText(t, base+"/metrics")
	assert.Contains(t, metrics, "herald_storage_writable 1")
	servertest.MustPost(t, base, alice, "after")
	servertest.MustSignUp(t, base, "bob")
	d = servertest.MustGQL(t, base, alice.Token, `{ viewer { messageCount messages(first: 10) { edges { node { text } } } } }`, nil)
	viewer := d["viewer"].(map[string]any)
	assert.EqualValues(t, 2, viewer["messageCount"], "the refused post was not counted")
	assert.Len(t, viewer["messages"].(map[string]any)["edges"], 2)
	r.stop(t)

	// The reserve is back in place for the next time.
	fi, err := disk.Stat(filepath.Join(data, datadir.EmbeddedDir, "EMERGENCY_BALLAST"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
}
