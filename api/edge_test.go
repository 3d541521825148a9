package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// rawRequest opens a connection, writes head (a request's header, with
// its blank line) and whatever of the body is given, and returns the
// connection for more.
func rawRequest(t *testing.T, e *env, head string, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	return conn
}

func postHead(path, token string, contentLength int) string {
	h := "POST " + path + " HTTP/1.1\r\nHost: guard\r\nContent-Type: application/json\r\n"
	if token != "" {
		h += "Authorization: Bearer " + token + "\r\n"
	}
	return h + fmt.Sprintf("Content-Length: %d\r\n\r\n", contentLength)
}

// readProblem reads one answer from conn within limit and checks it is
// the problem code with status.
func readProblem(t *testing.T, conn net.Conn, limit time.Duration, status int, code string) time.Duration {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(limit))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", limit, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var p problem.Problem
	if res.StatusCode != status || json.Unmarshal(body, &p) != nil || string(p.Code) != code ||
		res.Header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("got %d %s %s, want %d %s", res.StatusCode, res.Header.Get("Content-Type"), body, status, code)
	}
	return time.Since(start)
}

// What a hostile or broken client costs is bounded by the header: the
// body is refused before it is read.
func TestBodiesRefusedBeforeTheyAreRead(t *testing.T) {
	e := start(t)
	cases := []struct {
		name, token string
		announced   int
		status      int
		code        string
	}{
		{"no token announcing 1 MiB", "", 1 << 20, http.StatusUnauthorized, "unauthorized"},
		{"wrong token announcing 1 MiB", "not-a-token", 1 << 20, http.StatusUnauthorized, "unauthorized"},
		// Under the body limit, but more than a stranger may send.
		{"wrong token announcing 8 KiB", "not-a-token", 8 << 10, http.StatusUnauthorized, "unauthorized"},
		{"valid token announcing 1 MiB", testToken, 1 << 20, http.StatusRequestEntityTooLarge, "payload_too_large"},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/n8n/error", "/v1/reserve"} {
			t.Run(c.name+" to "+path, func(t *testing.T) {
				// Only the header and 10 bytes are sent: an answer now
				// proves the rest was never waited for.
				conn := rawRequest(t, e, postHead(path, c.token, c.announced), `{"executio`)
				readProblem(t, conn, 2*time.Second, c.status, c.code)
			})
		}
	}
	t.Run("a small body with a wrong token is read and answered 401 on a live connection", func(t *testing.T) {
		body := `{"namespace":"crm-contacts","key":"evt_1"}`
		conn := rawRequest(t, e, postHead("/v1/reserve", "not-a-token", len(body)), body)
		readProblem(t, conn, 2*time.Second, http.StatusUnauthorized, "unauthorized")
		// The connection stays usable for the next request.
		io.WriteString(conn, postHead("/v1/reserve", testToken, len(body))+body)
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("second request on the connection: %v %v", res, err)
		}
	})
	t.Run("a chunked body without a token is cut at a few KiB", func(t *testing.T) {
		// 8 KiB is far under the 64 KiB limit of a valid token. (fasthttp
		// forgets the request when its body fails, so this refusal cannot
		// be turned into a 401.)
		head := "POST /v1/n8n/error HTTP/1.1\r\nHost: guard\r\nTransfer-Encoding: chunked\r\n\r\n"
		chunk := fmt.Sprintf("%x\r\n%s\r\n", 8<<10, strings.Repeat("x", 8<<10))
		conn := rawRequest(t, e, head, chunk)
		readProblem(t, conn, 2*time.Second, http.StatusRequestEntityTooLarge, "payload_too_large")
	})
}

// A client that sends too slowly is cut at the read timeout with a real
// 408, not a 400 that mentions 408.
func TestSlowSenderGets408(t *testing.T) {
	e := start(t, withAPI(api.Config{Limits: api.Limits{ReadTimeout: 300 * time.Millisecond}}))
	body := `{"namespace":"crm-contacts","key":"evt_slow"}`
	conn := rawRequest(t, e, postHead("/v1/reserve", testToken, len(body)), body[:5])
	took := readProblem(t, conn, 3*time.Second, http.StatusRequestTimeout, "request_timeout")
	if took > 2*time.Second {
		t.Fatalf("cut after %s, the read timeout is 300ms", took)
	}
	// Nothing was recorded.
	a := e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_slow").JSON(t)
	if a["found"] != false {
		t.Fatalf("the slow request changed the store: %v", a)
	}
}

// Connections over the cap are refused at once with 503 overloaded, are
// counted and logged once; those under it are served.
func TestConnectionCap(t *testing.T) {
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	e := start(t, withAPI(api.Config{Limits: api.Limits{MaxConnections: 3}, Logger: log}))
	// Three idle connections hold every slot (a header never finished).
	var holders []net.Conn
	for range 3 {
		holders = append(holders, rawRequest(t, e, "GET /healthz HTTP/1.1\r\n", ""))
	}
	time.Sleep(100 * time.Millisecond) // let the server accept them
	for range 2 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		readProblem(t, conn, 2*time.Second, http.StatusServiceUnavailable, "overloaded")
		conn.Close()
	}
	if n := strings.Count(logs.String(), "connection cap is reached"); n != 1 {
		t.Fatalf("%d log lines about the cap, want 1:\n%s", n, logs.String())
	}
	// Once the slots are free, requests are served and the refusals show.
	for _, c := range holders {
		c.Close()
	}
	var metrics []byte
	var err error
	if !testwait.Poll(5*time.Second, func() bool {
		var res *http.Response
		if res, err = e.client.Get(e.url + "/metrics"); err != nil {
			return false
		}
		metrics, _ = io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}) {
		t.Fatalf("not served after the slots were freed: %v", err)
	}
	var refused int
	for _, line := range strings.Split(string(metrics), "\n") {
		fmt.Sscanf(line, "n8n_guard_connections_refused_total %d", &refused)
	}
	if refused < 2 {
		t.Fatalf("%d refusals counted, want at least 2", refused)
	}
}
