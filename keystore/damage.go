package keystore

import "github.com/n8n-guard/n8n-guard/errs"

// RecordDamaged is the answer for a key whose stored record fails its
// checksum: deciding on it could accept again a key that was finished.
func RecordDamaged(ns, key string) *errs.Error {
	return errs.Errorf(errs.RecordDamaged, "the stored record of %s/%s is damaged (its checksum does not match): it is not decided on and nothing is written over it; see docs/runbooks.md, \"A record is damaged\"", ns, key)
}
