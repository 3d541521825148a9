package notify_test

import (
	"net/http"
	"sync"
)

// countingTransport counts the requests that left the process, answered
// or not (a refused connection never reaches the fake).
type countingTransport struct {
	mu   sync.Mutex
	n    int
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
