package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Parked keys by the start of their wait (keystore/wait.go): the partial
// indexes guard_keys_waits and guard_keys_waits_destination (migration
// 0022) order them by waitSinceSQL; keep the expression and the predicate
// the same here so that the planner uses them.
const (
	waitSinceSQL  = `LEAST(parked_since, parked_at)` // keystore.Record.WaitingSince
	waitsWhereSQL = `state = 'parked' AND parked_at IS NOT NULL`
)

// ParkedByWait implements keystore.WaitReader. A damaged row is skipped
// and the listing goes on past it.
func (s *Store) ParkedByWait(ctx context.Context, q keystore.WaitQuery) ([]*keystore.Record, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	return readPages(q.Limit, func(want int) ([]*keystore.Record, int, error) {
		page, read, last, err := s.waitPage(ctx, q, want)
		q.AfterSince, q.AfterNamespace, q.AfterKey = last.at, last.ns, last.key
		return page, read, err
	})
}

// readPages reads up to limit intact records, page(want) reading up to
// want rows on from where the previous page ended and saying how many it
// read, damaged ones included: a page is full whenever enough intact rows
// follow, however many damaged ones come first.
func readPages(limit int, page func(want int) (recs []*keystore.Record, read int, err error)) ([]*keystore.Record, error) {
	var out []*keystore.Record
	for {
		want := limit - len(out)
		recs, read, err := page(want)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		if len(out) == limit || read < want {
			return out, nil
		}
	}
}

// waitPage reads up to limit rows of q; read is how many rows it read,
// damaged ones included, and last the place of the last.
func (s *Store) waitPage(ctx context.Context, q keystore.WaitQuery, limit int) (out []*keystore.Record, read int, last parkedRef, err error) {
	var sql strings.Builder
	sql.WriteString(`SELECT namespace, key, ` + waitSinceSQL + `, ` + pgKeyRead + ` FROM guard_keys WHERE ` + waitsWhereSQL)
	args := []any{limit}
	arg := func(cond string, v any) {
		args = append(args, v)
		sql.WriteString(` AND ` + strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if q.Destination != "" {
		arg(`destination = $?`, q.Destination)
	}
	if q.Namespace != "" {
		arg(`namespace = $?`, q.Namespace)
	}
	if len(q.Except) > 0 {
		arg(`NOT (namespace = ANY($?))`, q.Except)
	}
	if len(q.Stages) > 0 {
		stages := make([]string, len(q.Stages))
		for i, st := range q.Stages {
			stages[i] = string(st)
		}
		arg(`stage = ANY($?)`, stages)
	}
	if !q.Until.IsZero() {
		arg(waitSinceSQL+` <= $?`, q.Until)
	}
	if q.AfterNamespace != "" || q.AfterKey != "" {
		args = append(args, q.AfterSince, q.AfterNamespace, q.AfterKey)
		n := len(args)
		sql.WriteString(` AND (` + waitSinceSQL + `, namespace, key) > ($` + strconv.Itoa(n-2) + `, $` + strconv.Itoa(n-1) + `, $` + strconv.Itoa(n) + `)`)
	}
	sql.WriteString(` ORDER BY ` + waitSinceSQL + `, namespace, key LIMIT $1`)
	return s.parkedRows(ctx, "parked by wait", sql.String(), args...)
}

var _ keystore.WaitReader = (*Store)(nil)
