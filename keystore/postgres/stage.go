package postgres

import (
	"context"
	"strconv"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The stage of a key (keystore/stage.go) is the column stage (migration
// 0020), written by queueRecord with every row and indexed by
// guard_keys_stage (stage, namespace, key), so a queue reads its stage's
// rows and nothing else.

// KeysAtStage implements keystore.StageReader. A page stays full past
// damaged rows (skipped and reported), as ParkedByWait's does: the queues stop
// at the first page shorter than they asked for.
func (s *Store) KeysAtStage(ctx context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	var out []*keystore.Record
	for {
		want := q.Limit - len(out)
		page, read, lastNS, lastKey, err := s.stagePage(ctx, q, want)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(out) == q.Limit || read < want {
			return out, nil
		}
		q.AfterNamespace, q.AfterKey = lastNS, lastKey
	}
}

// stagePage reads up to limit rows of q; read is how many rows it read,
// damaged ones included, and lastNS, lastKey the place of the last.
func (s *Store) stagePage(ctx context.Context, q keystore.StageQuery, limit int) (out []*keystore.Record, read int, lastNS, lastKey string, err error) {
	sql := `SELECT namespace, key, ` + pgKeyRead + ` FROM guard_keys WHERE stage = $1`
	args := []any{string(q.Stage), limit}
	if q.Namespace != "" {
		args = append(args, q.Namespace)
		sql += ` AND namespace = $3`
	}
	if q.AfterNamespace != "" || q.AfterKey != "" {
		n := len(args)
		args = append(args, q.AfterNamespace, q.AfterKey)
		sql += ` AND (namespace, key) > ($` + strconv.Itoa(n+1) + `, $` + strconv.Itoa(n+2) + `)`
	}
	sql += ` ORDER BY namespace, key LIMIT $2`
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, "", "", s.dbErr("keys at stage", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ns, key string
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		read++
		lastNS, lastKey = ns, key
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err) // skipped: the keys behind it are read
			continue
		}
		if err != nil {
			return nil, 0, "", "", s.dbErr("keys at stage", err)
		}
		r.Namespace, r.Key = ns, key
		out = append(out, r)
	}
	return out, read, lastNS, lastKey, s.dbErrOrNil("keys at stage", rows.Err())
}

var _ keystore.StageReader = (*Store)(nil)
