package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// childEnv, when set to a database URL, turns the test binary into a small
// server process on that database (see runChildServer): the two-process
// test starts two of them, as two n8n-guard replicas would run.
const childEnv = "N8N_GUARD_PG_CHILD"

// TestPostgresReplica is not a test: re-executed with childEnv set, the
// test binary serves reserve and complete over loopback HTTP until its
// standard input closes. It uses the database's clock, as a replica does.
func TestPostgresReplica(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("the replica half of TestPostgres/two_processes")
	}
	ctx := context.Background()
	s, err := postgres.Open(ctx, os.Getenv(childEnv), postgres.Options{})
	if err != nil {
		t.Fatalf("replica: open: %v", err)
	}
	defer s.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("replica: listen: %v", err)
	}
	answer := func(w http.ResponseWriter, res keystore.Result, err error) {
		out := map[string]any{"outcome": res.Outcome, "token": res.Token, "pid": os.Getpid()}
		if err != nil {
			out["code"] = errs.CodeOf(err)
		}
		json.NewEncoder(w).Encode(out)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reserve", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.Reserve(r.Context(), keystore.ReserveRequest{Namespace: "crm-contacts", Key: r.FormValue("key"), Owner: "copy",
			Destination: r.FormValue("destination")})
		answer(w, res, err)
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.Fail(r.Context(), keystore.FailRequest{Namespace: "crm-contacts", Key: r.FormValue("key"), Token: r.FormValue("token"),
			Reason: keystore.Reason(r.FormValue("reason"))})
		answer(w, res, err)
	})
	mux.HandleFunc("POST /complete", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.Complete(r.Context(), keystore.CompleteRequest{Namespace: "crm-contacts", Key: r.FormValue("key"), Token: r.FormValue("token"), ResultRef: "crm-1"})
		answer(w, res, err)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	fmt.Printf("listening %s\n", l.Addr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

type childServer struct {
	addr  string
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

func startChild(t *testing.T, dbURL string) *childServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresReplica$")
	cmd.Env = append(os.Environ(), childEnv+"="+dbURL)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childServer{stdin: stdin, cmd: cmd}
	t.Cleanup(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		t.Fatalf("child server did not start: %q %v", line, err)
	}
	c.addr = strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	return c
}

type childAnswer struct {
	Outcome keystore.Outcome `json:"outcome"`
	Token   string           `json:"token"`
	Code    errs.Code        `json:"code"`
	PID     int              `json:"pid"`
}

func callChild(client *http.Client, c *childServer, path string, form url.Values) (childAnswer, error) {
	resp, err := client.PostForm("http://"+c.addr+path, form)
	if err != nil {
		return childAnswer{}, err
	}
	defer resp.Body.Close()
	var a childAnswer
	err = json.NewDecoder(resp.Body).Decode(&a)
	return a, err
}

// Two n8n-guard processes on one database behave as one: the conformance
// suite's "two copies at once", with the copies alternating between two
// real processes, accepts exactly one per key; the winner's token then
// completes the key through the other process.
func (pg *pgEnv) testTwoProcesses(t *testing.T) {
	dbURL := pg.freshSchema(t)
	servers := []*childServer{startChild(t, dbURL), startChild(t, dbURL)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}, Timeout: 30 * time.Second}
	const copies, rounds = 100, 50
	var served [2]atomic.Int32
	for round := 0; round < rounds; round++ {
		key := fmt.Sprintf("evt_round_%d", round)
		var accepted atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < copies; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				a, err := callChild(client, servers[g%2], "/reserve", url.Values{"key": {key}})
				if err != nil {
					t.Error(err)
					return
				}
				served[g%2].Add(1)
				switch a.Outcome {
				case keystore.OutcomeAccepted:
					accepted.Add(1)
					winner.Store([2]any{g % 2, a.Token})
				case keystore.OutcomeInProgress:
				default:
					t.Errorf("unexpected answer %+v", a)
				}
			}(g)
		}
		close(start)
		wg.Wait()
		if n := accepted.Load(); n != 1 {
			t.Fatalf("round %d: %d copies accepted across two processes, want exactly 1", round, n)
		}
		w := winner.Load().([2]any)
		other := servers[1-w[0].(int)]
		a, err := callChild(client, other, "/complete", url.Values{"key": {key}, "token": {w[1].(string)}})
		if err != nil || a.Outcome != keystore.OutcomeCompleted {
			t.Fatalf("complete through the other process: %+v %v", a, err)
		}
		a, err = callChild(client, servers[w[0].(int)], "/reserve", url.Values{"key": {key}})
		if err != nil || a.Outcome != keystore.OutcomeDuplicate {
			t.Fatalf("reserve after complete: %+v %v", a, err)
		}
	}
	if served[0].Load() == 0 || served[1].Load() == 0 {
		t.Fatalf("both processes must have served: %d / %d", served[0].Load(), served[1].Load())
	}

	// A destination found unreachable by one key through each process
	// pauses reserves on both: the breaker, and the keys it counted, are
	// shared.
	for i, srv := range servers {
		key := fmt.Sprintf("evt_crm_%d", i)
		a, err := callChild(client, srv, "/reserve", url.Values{"key": {key}, "destination": {"hubspot"}})
		if err != nil || a.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve: %+v %v", a, err)
		}
		a, err = callChild(client, srv, "/fail", url.Values{"key": {key}, "token": {a.Token}, "reason": {string(keystore.ReasonDestinationUnreachable)}})
		if err != nil || a.Outcome != keystore.OutcomeDestinationFailed {
			t.Fatalf("fail: %+v %v", a, err)
		}
	}
	a, err := callChild(client, servers[1], "/reserve", url.Values{"key": {"evt_crm_2"}, "destination": {"hubspot"}})
	if err != nil || a.Outcome != keystore.OutcomeDestinationPaused {
		t.Fatalf("reserve on the other process after the breaker opened: %+v %v", a, err)
	}
}
