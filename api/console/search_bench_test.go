package console_test

import (
	"net/url"
	"testing"
)

// The search page on the benchmark's store (bench_test.go: a million keys
// in three namespaces unless CONSOLE_BENCH_KEYS says otherwise), without
// a namespace:
//
//	CONSOLE_BENCH_KEYS=50000 go test -run XXX -bench ConsoleSearchWithout -benchtime 50x ./api/console/

func BenchmarkConsoleSearchWithoutNamespacePrefix(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&key_prefix=evt_3a")
}

func BenchmarkConsoleSearchWithoutNamespaceExact(b *testing.B) {
	_, key := benchKey(4242)
	benchPage(b, "/ui/keys?"+url.Values{"search": {"1"}, "key_prefix": {key}, "match": {"exact"}}.Encode())
}

// The holder by a part of its name reads records until a page is full (no
// index holds parts of names): "exec 424" is the holder of 100 keys
// (n8n exec 424) and, with a million keys, of 1,000 more (4240-4249).
func BenchmarkConsoleSearchWithoutNamespaceHolderPart(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&holder=EXEC+424")
}
