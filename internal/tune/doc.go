// Package tune sets the Go runtime's process-wide knobs for serving (the
// number of Ps, the garbage collector), in one place with the measurements
// that chose them. Only main calls it: a library package never tunes the
// process it runs in. What the operator set in the environment (GOMAXPROCS,
// GOGC, GOMEMLIMIT) always wins.
package tune
