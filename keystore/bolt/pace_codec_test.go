package bolt

import (
	"reflect"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A pace reads back as it was written, and a damaged one is refused (the
// store then starts the destination's pace anew, said in the log).
func TestPaceCodec(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 123456789, time.UTC)
	for _, p := range []keystore.Pace{
		{},
		{Last: t0, Slots: []keystore.Slot{{Until: t0.Add(time.Minute), Namespace: "orders", Key: "evt-1"}, {}}},
		{Last: t0, Slots: []keystore.Slot{{}}, Calls: []keystore.Call{{At: t0, End: t0.Add(time.Millisecond), Slot: 0}, {At: t0.Add(time.Second), Slot: 3}}},
	} {
		v := encodePace(p)
		got, err := decodePace(v)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		want := p
		if want.Slots == nil {
			want.Slots = []keystore.Slot{}
		}
		if want.Calls == nil {
			want.Calls = []keystore.Call{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %+v, wrote %+v", got, want)
		}
		for cut := 0; cut < len(v); cut++ {
			if _, err := decodePace(v[:cut]); err == nil {
				t.Fatalf("%+v cut at %d of %d bytes read back", p, cut, len(v))
			}
		}
	}
}
