package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/server/internal/servertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubscribe(t *testing.T) {
	ts := servertest.New(t, nil)
	alice, bob := servertest.MustSignUp(t, ts.URL, "alice"), servertest.MustSignUp(t, ts.URL, "bob")
	servertest.MustFollow(t, ts.URL, bob, alice)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		args := []string{"-url", servertest.WSURL(ts.URL)}
		env := func(k string) string {
			if k == "HERALD_TOKEN" {
				return bob.Token
			}
			return ""
		}
		done <- Subscribe(ctx, args, env, outW, errW)
		outW.Close()
		errW.Close()
	}()
	// The command says when it is subscribed; post only then.
	line, err := bufio.NewReader(errR).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "subscribed")
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	// The line comes once the subscribe message is sent; the server
	// registers the subscription a moment later.
	require.Eventually(t, func() bool { return ts.Hub.Len() == 1 }, 10*time.Second, time.Millisecond)
	servertest.MustPost(t, ts.URL, alice, "live from alice")

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case l := <-lines:
		var ev struct {
			InboxEvents struct {
				Type        string
				UnreadCount int
				Edge        *struct {
					Cursor string
					Node   struct{ Text string }
				}
				Message struct {
					Text   string
					Author struct{ Handle string }
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
		assert.Equal(t, "ADDED", ev.InboxEvents.Type)
		assert.Equal(t, 1, ev.InboxEvents.UnreadCount)
		assert.Equal(t, "live from alice", ev.InboxEvents.Message.Text)
		assert.Equal(t, "alice", ev.InboxEvents.Message.Author.Handle)
		require.NotNil(t, ev.InboxEvents.Edge, "ADDED prints the new edge")
		assert.NotEmpty(t, ev.InboxEvents.Edge.Cursor)
		assert.Equal(t, "live from alice", ev.InboxEvents.Edge.Node.Text)
	case <-time.After(10 * time.Second):
		t.Fatal("no event printed")
	}
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "Ctrl-C ends the command cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("subscribe did not stop")
	}
}

func TestSubscribe_Errors(t *testing.T) {
	ts := servertest.New(t, nil)
	noEnv := func(string) string { return "" }
	err := Subscribe(context.Background(), []string{"-url", servertest.WSURL(ts.URL)}, noEnv, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "token is required")
	err = Subscribe(context.Background(), []string{"-url", servertest.WSURL(ts.URL), "-token", "nonsense"}, noEnv, io.Discard, io.Discard)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "4403"), "refused with 4403: %v", err)
}

// TestSubscribe_Resume cuts the command's connection to the real server
// and holds its reconnect while messages arrive: once it reconnects, it
// prints exactly the events it missed, then the live ones, none twice.
func TestSubscribe_Resume(t *testing.T) {
	ts := servertest.New(t, nil)
	alice, bob := servertest.MustSignUp(t, ts.URL, "alice"), servertest.MustSignUp(t, ts.URL, "bob")
	servertest.MustFollow(t, ts.URL, bob, alice)

	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	hold := make(chan struct{})
	netDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		n := len(conns)
		mu.Unlock()
		if n == 1 { // the reconnect waits for the test
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	t.Cleanup(func() { netDial = (&net.Dialer{}).DialContext })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Subscribe(ctx, []string{"-url", servertest.WSURL(ts.URL), "-token", bob.Token}, servertest.Env(), outW, errW)
		outW.Close()
		errW.Close()
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	notes := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			notes <- sc.Text()
		}
		close(notes)
	}()
	note := func(want string) {
		t.Helper()
		for {
			select {
			case l := <-notes:
				if strings.Contains(l, want) {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %q on stderr", want)
			}
		}
	}
	text := func() string {
		t.Helper()
		select {
		case l := <-lines:
			var ev struct {
				InboxEvents struct {
					Type    string
					Cursor  string
					Message struct{ Text string }
				}
			}
			require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
			assert.Equal(t, "ADDED", ev.InboxEvents.Type)
			assert.NotEmpty(t, ev.InboxEvents.Cursor)
			return ev.InboxEvents.Message.Text
		case <-time.After(10 * time.Second):
			t.Fatal("no event printed")
			return ""
		}
	}

	note("subscribed to inboxEvents;")
	require.Eventually(t, func() bool { return ts.Hub.Len() == 1 }, 10*time.Second, time.Millisecond)
	servertest.MustPost(t, ts.URL, alice, "one")
	assert.Equal(t, "one", text())

	mu.Lock()
	require.NoError(t, conns[0].Close())
	mu.Unlock()
	require.Eventually(t, func() bool { return ts.Hub.Len() == 0 }, 10*time.Second, time.Millisecond, "the server saw the connection drop")
	servertest.MustPost(t, ts.URL, alice, "two")
	servertest.MustPost(t, ts.URL, alice, "three")
	servertest.WaitIdle(t, ts.Svc) // their events are out, with nobody there to get them
	close(hold)
	note("resuming after the last event")
	assert.Equal(t, "two", text())
	assert.Equal(t, "three", text())
	servertest.MustPost(t, ts.URL, alice, "four")
	assert.Equal(t, "four", text(), "then live, nothing twice")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("subscribe did not stop")
	}
	for range lines {
	}
	for range notes {
	}
}
