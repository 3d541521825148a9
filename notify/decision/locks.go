package decision

import "sync"

// keyLocks is one mutex per notification ID, kept while someone holds or
// waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes id's mutex and returns its release.
func (k *keyLocks) lock(id string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[id]
	if l == nil {
		l = &keyLock{}
		k.m[id] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, id)
		}
		k.mu.Unlock()
	}
}
