//go:build unix

package chaos

import "testing"

// An execution that dies takes with it the reserve it re-sent and lost
// the answer of: sent again afterwards, the guard's answer (accepted
// again, the same token: a repeat, no write) was counted as a second
// write of the attempt, a violation no guard made (seen once in CI:
// "key k127 attempt 2: 2 side effects"). A lost reserve of another
// request stays: its execution lives and sends it again.
func TestADeadExecutionSendsNoLostReserveAgain(t *testing.T) {
	h := held{attempt: 2, token: "t", reqID: "c1-7"}
	cl := &client{held: map[string]held{"k127": h}, lost: map[string]string{"k127": "c1-7"}, old: map[string][]held{}}
	cl.dies("k127", h)
	if r, ok := cl.lost["k127"]; ok {
		t.Fatalf("the dead execution's lost reserve %s is still to be sent again", r)
	}
	if _, ok := cl.held["k127"]; ok || len(cl.old["k127"]) != 1 {
		t.Fatalf("the execution did not end: held %v, old %v", cl.held, cl.old)
	}
	cl = &client{held: map[string]held{"k1": h}, lost: map[string]string{"k1": "c1-9"}, old: map[string][]held{}}
	cl.dies("k1", h)
	if cl.lost["k1"] != "c1-9" {
		t.Fatal("a lost reserve of another request was dropped")
	}
}
