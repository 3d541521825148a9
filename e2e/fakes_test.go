//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// answer is how a fake target treats one request.
type answer int

const (
	answerOK  answer = iota // the side effect takes effect; 2xx with the new id
	answer500               // transient failure, nothing written
	answer429               // rate limited with Retry-After, nothing written
	answer400               // the target rejects the data, nothing written
	// answerHang writes, then never answers: the client times out although
	// the side effect took place. This is why a timeout is "unknown".
	answerHang
	// answer502Written and answer504Written write, then answer 502/504
	// with a gateway's HTML page: a proxy in front of the CRM gave up on
	// (or lost) the CRM's answer although the contact was created. This is
	// why a 502 or 504 is "unknown", not "nothing was written".
	answer502Written
	answer504Written
	// answerLost: the request is lost on the way in: nothing written, no
	// answer (the client times out; check_test.go).
	answerLost
)

// target is a fake CRM or mail API. Like most real ones it accepts an
// Idempotency-Key header but does not deduplicate on it, so every duplicate
// that gets through is counted. What a key's next requests get is planned
// per key; unplanned requests succeed.
type target struct {
	name     string // "crm", "mail"
	idField  string // name of the id in its success answer
	idPrefix string // prefix of the ids it hands out
	okStatus int

	mu       sync.Mutex
	addr     string
	srv      *http.Server
	plans    map[string][]answer
	writes   map[string]int // side effects that took effect, per Idempotency-Key
	requests map[string]int // every request, per Idempotency-Key
	bodies   map[string][]map[string]any
	nextID   int
	released chan struct{} // closed on Close to free hanging handlers
	// ids of the records written per Idempotency-Key, and the keys whose
	// search fails (check_test.go).
	ids          map[string][]string
	searchFails  map[string]bool
	searchCounts map[string]int
}

func startTarget(name, idField, idPrefix string, okStatus int) (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &target{
		name: name, idField: idField, idPrefix: idPrefix, okStatus: okStatus,
		addr:     ln.Addr().String(),
		plans:    map[string][]answer{},
		writes:   map[string]int{},
		requests: map[string]int{},
		bodies:   map[string][]map[string]any{},
		released: make(chan struct{}),
		ids:      map[string][]string{}, searchFails: map[string]bool{}, searchCounts: map[string]int{},
	}
	t.serve(ln)
	return t, nil
}

func (t *target) URL() string { return "http://" + t.addr }

func (t *target) serve(ln net.Listener) {
	t.srv = &http.Server{Handler: http.HandlerFunc(t.handle), ReadHeaderTimeout: 10 * time.Second}
	go t.srv.Serve(ln)
}

// Plan sets the answers for the next requests carrying key.
func (t *target) Plan(key string, answers ...answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plans[key] = append([]answer(nil), answers...)
}

// Refuse closes the port and every open connection, so new requests get
// "connection refused" like a target that is down.
func (t *target) Refuse() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.srv.Close()
}

// Accept opens the port again after Refuse.
func (t *target) Accept() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ln, err := net.Listen("tcp", t.addr)
	if err != nil {
		return err
	}
	t.serve(ln)
	return nil
}

// Writes is how many times key's side effect took effect.
func (t *target) Writes(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writes[key]
}

// Requests is how many requests carried key.
func (t *target) Requests(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requests[key]
}

// TotalWrites counts side effects over all keys.
func (t *target) TotalWrites() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, w := range t.writes {
		n += w
	}
	return n
}

// LastBody is the JSON body of the last request that carried key.
func (t *target) LastBody(key string) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bodies[key]
	if len(b) == 0 {
		return nil
	}
	return b[len(b)-1]
}

func (t *target) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(t.released)
	t.srv.Close()
}

func (t *target) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/contacts/search" {
		t.search(w, r) // check_test.go
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	key := r.Header.Get("Idempotency-Key")

	t.mu.Lock()
	t.requests[key]++
	t.bodies[key] = append(t.bodies[key], body)
	a := answerOK
	if plan := t.plans[key]; len(plan) > 0 {
		a, t.plans[key] = plan[0], plan[1:]
	}
	var id string
	if a == answerOK || a == answerHang || a == answer502Written || a == answer504Written {
		t.writes[key]++
		t.nextID++
		id = fmt.Sprintf("%s-%d", t.idPrefix, t.nextID)
		t.ids[key] = append(t.ids[key], id)
	}
	released := t.released
	t.mu.Unlock()

	switch a {
	case answerOK:
		writeJSON(w, t.okStatus, map[string]any{t.idField: id, "status": "created"})
	case answer500:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "internal server error"})
	case answer429:
		w.Header().Set("Retry-After", "30")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "rate limit exceeded"})
	case answer400:
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "email is not valid"})
	case answer502Written:
		gatewayPage(w, http.StatusBadGateway, "502 Bad Gateway")
	case answer504Written:
		gatewayPage(w, http.StatusGatewayTimeout, "504 Gateway Time-out")
	case answerHang, answerLost:
		select {
		case <-r.Context().Done():
		case <-released:
		case <-time.After(2 * time.Minute):
		}
	}
}

// gatewayPage answers as nginx does when the upstream's answer is lost.
func gatewayPage(w http.ResponseWriter, status int, title string) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<html>\r\n<head><title>%s</title></head>\r\n<body>\r\n<center><h1>%s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", title, title)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
