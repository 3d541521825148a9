// Package bolt is the embedded keystore.Store: one bbolt file in the data
// folder, written by one writer goroutine (see writer.go).
//
// It translates between the domain (package keystore) and bbolt: it loads
// a key and its destination's breaker, lets keystore's state machine
// decide, and saves the Step. It never decides itself, and never answers a
// write before it is durable. Other packages (notify) may keep their own
// buckets in the same file through DB.
package bolt
