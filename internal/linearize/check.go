package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is what Check found.
type Report struct {
	Histories  int           // keys checked, one history each
	Operations int           // operations in them
	Took       time.Duration // time spent checking
	Illegal    []Failure     // keys whose history no order explains
	TimedOut   []string      // keys whose check gave up (neither proved nor refuted)
}

// Failure is one key whose history is not linearizable.
type Failure struct {
	Key        string
	Operations int
	HTML       string // Porcupine's visualisation of the key's history, when written
}

func (f Failure) String() string {
	if f.HTML == "" {
		return fmt.Sprintf("key %s (%d operations)", f.Key, f.Operations)
	}
	return fmt.Sprintf("key %s (%d operations): visualisation in %s", f.Key, f.Operations, f.HTML)
}

// Check checks every key's history on its own, each for at most perKey.
// For a key whose history is not linearizable it writes Porcupine's HTML
// visualisation into dir (unless dir is empty).
func Check(history []porcupine.Operation, perKey time.Duration, dir string) Report {
	began := time.Now()
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := Model.ToModel()
	r := Report{Histories: len(keys), Operations: len(history)}
	for _, k := range keys {
		ops := byKey[k]
		res, info := porcupine.CheckOperationsVerbose(model, ops, perKey)
		switch res {
		case porcupine.Illegal:
			f := Failure{Key: k, Operations: len(ops)}
			if dir != "" {
				path := filepath.Join(dir, "linearize-"+safeName.ReplaceAllString(k, "_")+".html")
				if err := os.MkdirAll(dir, 0o755); err == nil && porcupine.VisualizePath(model, info, path) == nil {
					f.HTML = path
				}
			}
			r.Illegal = append(r.Illegal, f)
		case porcupine.Unknown:
			r.TimedOut = append(r.TimedOut, k)
		}
	}
	r.Took = time.Since(began)
	return r
}

var safeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// Op makes one operation of a history: the input's Call and Return are
// copied from the operation's, as the model needs them.
func Op(client int, in Input, out Output, call, ret int64) porcupine.Operation {
	if out.Unknown {
		ret = Open
	}
	in.Call, in.Return = call, ret
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// Evidence finds, in one key's history, the shortest prefix by call time
// that is already not linearizable, and returns the moment its last answer
// came: by then the checker could have known. ok is false when every
// prefix is linearizable (the whole history is not only with operations
// that came later).
func Evidence(ops []porcupine.Operation, perKey time.Duration) (at int64, n int, ok bool) {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	model := Model.ToModel()
	for k := 1; k <= len(sorted); k++ {
		if porcupine.CheckOperationsTimeout(model, sorted[:k], perKey) != porcupine.Illegal {
			continue
		}
		for _, op := range sorted[:k] {
			end := op.Return
			if end == Open {
				end = op.Call
			}
			at = max(at, end)
		}
		return at, k, true
	}
	return 0, 0, false
}
