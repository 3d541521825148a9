package postgres

import (
	"context"
	"encoding/json"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Keys whose page waits for their check (keystore/check.go): the hold is
// the row's check_hold document, and the check runner's queue is the
// partial index guard_keys_check_hold (migration 0006). A claim is an
// ordinary decision on the key: of several guards claiming one key's
// check at once, the version check lets exactly one write its claim, and
// the others decide again on the claimed row and are refused.

// checkHold is the hold as the column keeps it (NULL: none).
func checkHold(h *keystore.CheckHold) any {
	if h == nil {
		return nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		panic("json of a fixed struct: " + err.Error())
	}
	return string(b)
}

// HeldForCheck implements keystore.CheckStore.
func (s *Store) HeldForCheck(ctx context.Context, limit int) ([]*keystore.Record, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, `SELECT namespace, key, `+pgKeyRead+` FROM guard_keys
		WHERE state = 'unknown' AND check_hold IS NOT NULL
		ORDER BY (check_hold->>'since')::timestamptz, namespace, key LIMIT $1`, limit)
	if err != nil {
		return nil, s.dbErr("held for check", err)
	}
	defer rows.Close()
	var out []*keystore.Record
	for rows.Next() {
		var ns, key string
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		if err != nil {
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err) // skipped: the keys behind it are checked
				continue
			}
			return nil, s.dbErr("held for check", err)
		}
		out = append(out, r)
	}
	return out, s.dbErrOrNil("held for check", rows.Err())
}

var _ keystore.CheckStore = (*Store)(nil)
