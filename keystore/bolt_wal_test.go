package keystore

import (
	"bytes"
	"slices"
	"testing"
)

func TestParseWAL(t *testing.T) {
	frame := func(seq uint64, payload string) []byte { return appendWALRecord(nil, seq, []byte(payload)) }
	seqs := func(recs []walRecord) []uint64 {
		var out []uint64
		for _, r := range recs {
			out = append(out, r.seq)
		}
		return out
	}
	whole := slices.Concat(frame(7, "a"), frame(8, "bb"), frame(9, "ccc"))
	torn := bytes.Clone(whole)
	torn[len(torn)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		log  []byte
		want []uint64
	}{
		{"zero-filled", make([]byte, 4096), nil},
		{"records then zeros", append(bytes.Clone(whole), make([]byte, 100)...), []uint64{7, 8, 9}},
		{"torn last record", torn, []uint64{7, 8}},
		{"cut short", whole[:len(whole)-2], []uint64{7, 8}},
		{"stale tail after a restart", slices.Concat(frame(20, "new"), frame(8, "old"), frame(9, "old")), []uint64{20}},
		{"length past the end", slices.Concat(frame(1, "x"), []byte{0x7f, 0xff, 0xff, 0xff}, make([]byte, 40)), []uint64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseWAL(tc.log)
			if !slices.Equal(seqs(got), tc.want) {
				t.Fatalf("records %v, want %v", seqs(got), tc.want)
			}
			if len(got) > 0 && string(got[0].payload) != map[uint64]string{7: "a", 20: "new", 1: "x"}[got[0].seq] {
				t.Fatalf("payload %q", got[0].payload)
			}
		})
	}
}
