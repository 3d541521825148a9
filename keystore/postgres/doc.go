// Package postgres is the keystore.Store on PostgreSQL, for several
// n8n-guard processes sharing one database.
//
// It translates between the domain (package keystore) and PostgreSQL: it
// reads a key and its destination's breaker, lets keystore's state machine
// decide, and writes the Step in one transaction. It never decides itself.
// Its schema is applied at Open by internal/migrate.
package postgres
