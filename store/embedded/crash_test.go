package embedded_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

const crashDirEnv = "HERALD_CRASH_CHILD_DIR"

// TestCrashChild is the process that gets killed: it posts one message to
// the author's followers and keeps delivering until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestKillDuringFanout")
	}
	ctx := context.Background()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	author, err := st.FindUserByHandle(ctx, "author")
	require.NoError(t, err)
	svc := service.NewService(st, pubsub.NewHub(), service.Options{PasswordCost: bcrypt.MinCost, ChunkSize: 100})
	require.NoError(t, svc.Start(ctx))
	m, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: os.Getenv("HERALD_CRASH_TEXT")})
	require.NoError(t, err)
	fmt.Printf("posted %s\n", m.ID)
	time.Sleep(time.Minute) // the parent kills us long before this
}

// TestKillDuringFanout kills a process with SIGKILL while it fans a message
// out, several times at different moments, and checks that after each
// restart every follower ends with every accepted message exactly once and
// exact counts.
func TestKillDuringFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const followers = 3000
	dir := t.TempDir()
	ctx := context.Background()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	_, fans := graph(t, st, followers)
	require.NoError(t, st.Close())

	var posted []string
	for round, delay := range []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond, 30 * time.Millisecond} {
		text := fmt.Sprintf("message %d", round)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, "HERALD_CRASH_TEXT="+text)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		accepted := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "posted ") {
				accepted = true
				break
			}
		}
		require.True(t, accepted, "child did not post")
		posted = append(posted, text)
		time.Sleep(delay)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		st, err := embedded.Open(dir, embedded.Options{})
		require.NoError(t, err)
		pending, err := st.PendingJobs(ctx)
		require.NoError(t, err)
		partial := len(pending) == 1 && len(pending[0].Cursor) > 0
		t.Logf("round %d: killed %v after the post was accepted; %d job(s) pending, partly delivered: %v", round, delay, len(pending), partial)
		svc := service.NewService(st, pubsub.NewHub(), service.Options{PasswordCost: bcrypt.MinCost, ChunkSize: 100})
		require.NoError(t, svc.Start(ctx))
		require.Eventually(t, svc.Idle, 30*time.Second, time.Millisecond)
		for _, f := range fans {
			page, err := svc.Inbox(ctx, f, store.Forward(store.NilID, 100))
			require.NoError(t, err)
			var texts []string
			for _, it := range page.Items {
				texts = append([]string{it.Message.Text}, texts...)
			}
			require.Equal(t, posted, texts, "inbox of a follower after round %d", round)
			require.Equal(t, store.InboxCounts{Total: len(posted), Unread: len(posted)}, page.Counts)
		}
		require.NoError(t, svc.Close(ctx))
		pending, err = st.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
		require.NoError(t, st.Close())
	}
}
