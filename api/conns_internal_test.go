package api

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/n8n-guard/n8n-guard/api/access"
)

// A /v1 route registered without the bearer check (one its sender signs
// instead, as Slack does) is not held to the stranger's 4 KiB, nor
// answered 401: the body limit and the route's own check apply.
func TestOpenV1RouteIsNotTreatedAsAStranger(t *testing.T) {
	s := newInternalServer(t, Config{})
	s.handle(route{method: fiber.MethodPost, path: "/v1/test/signed", scope: access.Open, handle: func(c *fiber.Ctx) error {
		return c.SendString(strconv.Itoa(len(c.Body())))
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	post := func(path string) (int, string) {
		res, err := http.Post("http://"+ln.Addr().String()+path, "application/x-www-form-urlencoded", bytes.NewReader(bytes.Repeat([]byte("x"), 8<<10)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := post("/v1/test/signed"); status != 200 || body != "8192" {
		t.Fatalf("open route: %d %s", status, body)
	}
	if status, _ := post("/v1/reserve"); status != 401 {
		t.Fatalf("token route without a token: %d", status)
	}
}
