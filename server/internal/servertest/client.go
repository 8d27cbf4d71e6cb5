package servertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// GQLResponse is a GraphQL response as a client sees it.
type GQLResponse struct {
	Status int
	Data   map[string]any
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
}

// Code returns the extensions.code of the first error, "" if none.
func (r GQLResponse) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// GQL posts a GraphQL operation to base+"/graphql" and decodes the answer.
// token may be "". It fails the test on transport errors, not GraphQL ones.
func GQL(t testing.TB, base, token, query string, vars map[string]any) GQLResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out GQLResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	out.Status = resp.StatusCode
	return out
}

// MustGQL is GQL that also requires the response to carry no errors.
func MustGQL(t testing.TB, base, token, query string, vars map[string]any) map[string]any {
	t.Helper()
	r := GQL(t, base, token, query, vars)
	require.Empty(t, r.Errors, "query %q", query)
	return r.Data
}

// User is a signed-up user as the tests know it.
type User struct {
	ID, Handle, Token string
}

// MustSignUp signs a user up over HTTP and returns its id and token.
func MustSignUp(t testing.TB, base, handle string) User {
	t.Helper()
	d := MustGQL(t, base, "", `mutation($h: String!) { signUp(input: {handle: $h, password: "correct horse"}) { token user { id handle } } }`,
		map[string]any{"h": handle})
	p := d["signUp"].(map[string]any)
	u := p["user"].(map[string]any)
	return User{ID: u["id"].(string), Handle: u["handle"].(string), Token: p["token"].(string)}
}

// MustFollow makes follower follow followee over HTTP.
func MustFollow(t testing.TB, base string, follower, followee User) {
	t.Helper()
	MustGQL(t, base, follower.Token, `mutation($id: ID!) { follow(userId: $id) { id } }`, map[string]any{"id": followee.ID})
}

// MustPost posts text as author over HTTP and returns the message id.
func MustPost(t testing.TB, base string, author User, text string) string {
	t.Helper()
	d := MustGQL(t, base, author.Token, `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`, map[string]any{"t": text})
	return d["postMessage"].(map[string]any)["id"].(string)
}

// WSURL turns an http:// base URL into the ws:// URL of /graphql.
func WSURL(base string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/graphql"
}

// WSMsg is a message of either websocket protocol.
type WSMsg struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// WSClient is a minimal graphql-transport-ws / graphql-ws client. Every
// read is bounded by a deadline, and pings are answered, so a test never
// hangs on a silent server.
type WSClient struct {
	T    *testing.T
	Conn *websocket.Conn
}

// DialWS opens a websocket to the server speaking protocol. It returns the
// handshake response and error as they are, for tests that expect refusal.
func DialWS(t *testing.T, base, protocol string, header http.Header) (*WSClient, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{protocol}, HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(WSURL(base), header)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, resp, err
	}
	c := &WSClient{T: t, Conn: conn}
	t.Cleanup(func() { conn.Close() })
	return c, resp, nil
}

func (c *WSClient) Send(typ, id string, payload any) {
	c.T.Helper()
	m := map[string]any{"type": typ}
	if id != "" {
		m["id"] = id
	}
	if payload != nil {
		m["payload"] = payload
	}
	require.NoError(c.T, c.Conn.SetWriteDeadline(time.Now().Add(5*time.Second)))
	require.NoError(c.T, c.Conn.WriteJSON(m))
}

// Read returns the next message other than a ping (answered) or a legacy
// keep-alive, or the read error (a *websocket.CloseError when the server
// closed the connection).
func (c *WSClient) Read(timeout time.Duration) (WSMsg, error) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if err := c.Conn.SetReadDeadline(deadline); err != nil {
			return WSMsg{}, err
		}
		var m WSMsg
		if err := c.Conn.ReadJSON(&m); err != nil {
			return WSMsg{}, err
		}
		switch m.Type {
		case "ping":
			c.Send("pong", "", nil)
		case "ka":
		default:
			return m, nil
		}
	}
}

// MustRead is Read that fails the test on an error.
func (c *WSClient) MustRead(timeout time.Duration) WSMsg {
	c.T.Helper()
	m, err := c.Read(timeout)
	require.NoError(c.T, err)
	return m
}

// CloseNormally sends a 1000 close frame and closes the connection, as a
// well-behaved client leaving does.
func (c *WSClient) CloseNormally() {
	_ = c.Conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	_ = c.Conn.Close()
}

// Acked opens a graphql-transport-ws connection to srv acknowledged for u.
func Acked(t *testing.T, srv *Server, u User) *WSClient {
	t.Helper()
	c, _, err := DialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + u.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	return c
}
