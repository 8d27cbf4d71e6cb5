package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herald/server/datadir"
	"herald/server/internal/servertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2E builds the real binary, runs the product tour against it over
// HTTP, stops it with SIGTERM, and checks that a restart on the same data
// directory finds everything again, including sessions (the token secret
// file persisted).
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary; skipped in -short mode")
	}
	bin := servertest.BuildHerald(t)
	data := t.TempDir()

	// First run: the tour.
	p := startHerald(t, bin, data)
	base := "http://" + p.addr
	require.FileExists(t, filepath.Join(data, datadir.SecretFile), "the secret file is created on first start")

	alice := signUpWithPassword(t, base, "alice", "alice's password")
	bob := signUpWithPassword(t, base, "bob", "bob's password")
	servertest.MustFollow(t, base, bob, alice)
	msgID := servertest.MustPost(t, base, alice, "hello, followers")

	const inboxQuery = `{ inbox(first: 10) { totalCount unreadCount edges { node { id text author { handle } } } } }`
	var inbox map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		inbox = servertest.MustGQL(t, base, bob.Token, inboxQuery, nil)["inbox"].(map[string]any)
		if len(inbox["edges"].([]any)) > 0 {
			break
		}
		require.True(t, i < 200 && time.Now().Before(deadline), "bob's inbox never received the post")
		time.Sleep(50 * time.Millisecond)
	}
	checkBobInbox(t, inbox, msgID)

	d := servertest.MustGQL(t, base, "", `mutation { logIn(input: {handle: "alice", password: "alice's password"}) { token user { handle } } }`, nil)
	assert.Equal(t, "alice", d["logIn"].(map[string]any)["user"].(map[string]any)["handle"])

	p.stop(t)

	// Second run on the same data: nothing lost.
	p = startHerald(t, bin, data)
	base = "http://" + p.addr

	d = servertest.MustGQL(t, base, "", `{ alice: user(handle: "alice") { id followerCount followingCount messageCount messages(first: 5) { edges { node { id text } } } }
		bob: user(handle: "BOB") { id followerCount followingCount } }`, nil)
	a, b := d["alice"].(map[string]any), d["bob"].(map[string]any)
	assert.Equal(t, alice.ID, a["id"], "ids are stable across restarts")
	assert.EqualValues(t, 1, a["followerCount"])
	assert.EqualValues(t, 0, a["followingCount"])
	assert.EqualValues(t, 1, a["messageCount"])
	msgs := a["messages"].(map[string]any)["edges"].([]any)
	require.Len(t, msgs, 1)
	assert.Equal(t, msgID, msgs[0].(map[string]any)["node"].(map[string]any)["id"])
	assert.EqualValues(t, 0, b["followerCount"])
	assert.EqualValues(t, 1, b["followingCount"])

	inbox = servertest.MustGQL(t, base, bob.Token, inboxQuery, nil)["inbox"].(map[string]any)
	checkBobInbox(t, inbox, msgID)

	d = servertest.MustGQL(t, base, alice.Token, `{ viewer { handle } }`, nil)
	assert.Equal(t, "alice", d["viewer"].(map[string]any)["handle"], "a token issued before the restart is still valid")

	d = servertest.MustGQL(t, base, "", `mutation { logIn(input: {handle: "bob", password: "bob's password"}) { token } }`, nil)
	assert.NotEmpty(t, d["logIn"].(map[string]any)["token"])

	p.stop(t)
}

func checkBobInbox(t *testing.T, inbox map[string]any, msgID string) {
	t.Helper()
	assert.EqualValues(t, 1, inbox["totalCount"])
	assert.EqualValues(t, 1, inbox["unreadCount"])
	edges := inbox["edges"].([]any)
	require.Len(t, edges, 1)
	n := edges[0].(map[string]any)["node"].(map[string]any)
	assert.Equal(t, msgID, n["id"])
	assert.Equal(t, "hello, followers", n["text"])
	assert.Equal(t, "alice", n["author"].(map[string]any)["handle"])
}

func signUpWithPassword(t *testing.T, base, handle, password string) servertest.User {
	t.Helper()
	d := servertest.MustGQL(t, base, "", `mutation($h: String!, $p: String!) { signUp(input: {handle: $h, password: $p}) { token user { id handle } } }`,
		map[string]any{"h": handle, "p": password})
	p := d["signUp"].(map[string]any)
	u := p["user"].(map[string]any)
	return servertest.User{ID: u["id"].(string), Handle: u["handle"].(string), Token: p["token"].(string)}
}

// heraldProc is a running server binary.
type heraldProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, set before done is closed

	mu   sync.Mutex
	logs []string
}

// startHerald starts the binary on a free port with data as its data
// directory and returns once it logs the address it listens on. The
// environment carries no HERALD_* variable, so the secret file is used.
func startHerald(t *testing.T, bin, data string) *heraldProc {
	t.Helper()
	return startHeraldWith(t, bin, data, "debug")
}

// startHeraldWith is startHerald logging at level, with env (KEY=value)
// added to the environment.
func startHeraldWith(t *testing.T, bin, data, level string, env ...string) *heraldProc {
	t.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-data", data, "-log-level", level)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	p := &heraldProc{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs = append(p.logs, line)
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
		}
		// Wait only after the pipe is drained, as os/exec requires.
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", p.log())
		}
	})

	select {
	case p.addr = <-listening:
	case <-p.done:
		t.Fatalf("server exited before listening (%v):\n%s", p.err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not log its address within 30s:\n%s", p.log())
	}
	require.NotEmpty(t, p.addr)
	return p
}

// stop sends SIGTERM and requires a clean exit (status 0) within 30s.
func (p *heraldProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not exit within 30s of SIGTERM:\n%s", p.log())
	}
	require.NoError(t, p.err, "exit status; log:\n%s", p.log())
	assert.Equal(t, 0, p.cmd.ProcessState.ExitCode())
	assert.Contains(t, p.log(), `"msg":"store closed"`, "shutdown ran to the end")
}

func (p *heraldProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs, "\n")
}
