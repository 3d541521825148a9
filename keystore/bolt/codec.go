package bolt

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// On disk a record is a CBOR array (no field names). Times are Unix
// milliseconds, all but created_at stored as an offset from created_at
// (small numbers take fewer bytes), history events and `via` are codes, and
// a history entry by the record's own owner does not repeat the name: a
// finished record takes about a hundred bytes. Fields are only ever appended
// to these structs, so old files stay readable.

type diskRecord struct {
	_           struct{} `cbor:",toarray"`
	State       uint8
	Attempt     uint32
	Owner       string
	Lease       int64 // offsets from Created, +1; 0 = unset
	ResultRef   string
	Result      []byte
	Reason      string
	Message     string
	Retryable   bool
	Via         uint8
	Destination string
	Created     int64
	Updated     int64
	Expires     int64
	ResolvedBy  string
	ResolvedAt  int64
	Note        string
	History     []diskTransition
	Fingerprint []byte
	// TokenHash is the token's hash, followed by its seal when the reserve
	// carried a request_id (keystore.Record.TokenSeal). One field for both:
	// fxamacker/cbor refuses to decode an array into a toarray struct with
	// a different number of fields, so a new field would make every record
	// written before unreadable.
	TokenHash []byte
}

// diskRecordSummary is a record with a summary (keystore.Record.Summary):
// the array of diskRecord with the summary appended. A record without one
// is written as diskRecord, so the files of older versions read as they
// did, and an older version reads every record that has none.
type diskRecordSummary struct {
	_ struct{} `cbor:",toarray"`
	diskRecord
	Summary string
}

type diskTransition struct {
	_       struct{} `cbor:",toarray"`
	At      int64    // offset from the record's Created
	Event   uint8
	Attempt uint32
	By      string // "" = the record's owner; ownerNone = nobody
	Detail  string
}

const ownerNone = "\x00"

// The length of the array of a record with a summary.
const recordSummaryLen = 21

// tokenHashLen is the length of keystore's token hash (and of a seal).
const tokenHashLen = 16

var eventCodes = map[keystore.HistoryEvent]uint8{keystore.HistoryReserved: 1, keystore.HistoryCompleted: 2, keystore.HistoryFailed: 3, keystore.HistoryUnknown: 4, keystore.HistoryLeaseExpired: 5, keystore.HistoryResolved: 6,
	keystore.HistoryParked: 7, keystore.HistoryResumed: 8, keystore.HistoryResumeLost: 9, keystore.HistoryParkedOverdue: 10,
	keystore.HistoryApprovalRequested: 20, keystore.HistoryApproved: 21, keystore.HistoryApprovalRejected: 22, // approval: 20-29
	keystore.HistoryChecked: 30, keystore.HistoryCheckFailed: 31, // checks (keystore/check.go): 30-39
	keystore.HistoryAcknowledged: 40, keystore.HistorySnoozed: 41, // acknowledgements (keystore/ack.go): 40-49
	keystore.HistoryRerunGate: 50, keystore.HistoryRerunGranted: 51, keystore.HistoryRerunStarted: 52, keystore.HistoryRerunRefused: 53, keystore.HistoryRerunStarting: 54} // re-runs (keystore/rerun.go): 50-59
var eventByCode = map[uint8]keystore.HistoryEvent{1: keystore.HistoryReserved, 2: keystore.HistoryCompleted, 3: keystore.HistoryFailed, 4: keystore.HistoryUnknown, 5: keystore.HistoryLeaseExpired, 6: keystore.HistoryResolved,
	7: keystore.HistoryParked, 8: keystore.HistoryResumed, 9: keystore.HistoryResumeLost, 10: keystore.HistoryParkedOverdue,
	20: keystore.HistoryApprovalRequested, 21: keystore.HistoryApproved, 22: keystore.HistoryApprovalRejected,
	30: keystore.HistoryChecked, 31: keystore.HistoryCheckFailed,
	40: keystore.HistoryAcknowledged, 41: keystore.HistorySnoozed,
	50: keystore.HistoryRerunGate, 51: keystore.HistoryRerunGranted, 52: keystore.HistoryRerunStarted, 53: keystore.HistoryRerunRefused, 54: keystore.HistoryRerunStarting}
var viaCodes = map[keystore.Via]uint8{"": 0, keystore.ViaPrimary: 1, keystore.ViaFallback: 2}
var viaByCode = map[uint8]keystore.Via{0: "", 1: keystore.ViaPrimary, 2: keystore.ViaFallback}

// diskBreaker is a breaker on disk: a CBOR array of its fields, cut after
// the last part the breaker uses (breakerBase, breakerHeld, breakerReset,
// breakerCounted, breakerViews), so that a file an older release reads back holds
// nothing it cannot decode but a part it did not know of. Every length
// reads back; a field beyond the array is its zero value.
type diskBreaker struct {
	State          string
	OpenedAt       int64
	ReopensAt      int64
	Failures       uint32
	Paused         uint32
	ProbeNamespace string
	ProbeKey       string
	ProbeUntil     int64
	// with a maintenance window
	HoldBy     string
	HoldReason string
	HoldSetAt  int64
	HoldUntil  int64
	// reset by a person (until it opens again)
	ResetBy     string
	ResetReason string
	ResetAt     int64
	// the digests of the keys counted since distinct keys were counted
	// (keystore.Breaker.FailedKeys); a count written before has none and
	// counts on from its number
	FailedKeys []string
	// the namespaces' views (keystore.EncodeViews) and the namespaces seen
	// reserving through the destination (keystore/breaker_view.go); a
	// breaker written before has neither: no view, none seen
	Views    []byte
	Seen     []string
	OpenedBy string
}

// The lengths of a breaker's array: the first release's fields, then with
// a maintenance window, then reset by a person, then with counted keys.
const (
	breakerBase    = 8
	breakerHeld    = 12
	breakerReset   = 15
	breakerCounted = 16
	breakerViews   = 19
)

// fields are d's fields in their order on disk.
func (d *diskBreaker) fields() []any {
	return []any{&d.State, &d.OpenedAt, &d.ReopensAt, &d.Failures, &d.Paused, &d.ProbeNamespace, &d.ProbeKey, &d.ProbeUntil,
		&d.HoldBy, &d.HoldReason, &d.HoldSetAt, &d.HoldUntil, &d.ResetBy, &d.ResetReason, &d.ResetAt, &d.FailedKeys, &d.Views, &d.Seen, &d.OpenedBy}
}

// The lengths of an event's array: the first release's fields, then with
// the bulk action, then with the summary, then with a catch-up's figures.
// An event is written in the shortest layout that holds what it carries,
// so an event with none of them is read back by an earlier release.
const (
	eventBase    = 11
	eventBulk    = 12
	eventSummary = 13
	eventCatchUp = 16
)

// fields are d's items in their order on disk: the longest layout, of
// which a shorter event is the first eventBase, eventBulk or eventSummary
// items.
func (d *eventCatchUpLayout) fields() []any {
	return []any{&d.At, &d.Kind, &d.Namespace, &d.Key, &d.Attempt, &d.Owner, &d.Destination, &d.Reason, &d.Message,
		&d.ReopensAt, &d.Paused, &d.Bulk, &d.Summary, &d.Resumed, &d.Lost, &d.Took}
}

// arrayLen is the number of items of the CBOR array b starts with (-1:
// not an array of a length this codec writes).
func arrayLen(b []byte) int {
	switch {
	case len(b) > 0 && b[0] >= 0x80 && b[0] <= 0x97:
		return int(b[0] - 0x80)
	case len(b) > 1 && b[0] == 0x98:
		return int(b[1])
	}
	return -1
}

var stateCodes = map[keystore.State]uint8{keystore.StateReserved: 1, keystore.StateCompleted: 2, keystore.StateFailed: 3, keystore.StateUnknown: 4, keystore.StateParked: 5}
var stateByCode = map[uint8]keystore.State{1: keystore.StateReserved, 2: keystore.StateCompleted, 3: keystore.StateFailed, 4: keystore.StateUnknown, 5: keystore.StateParked}

func ms(t time.Time) int64 { return t.UnixMilli() }

func msPtr(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromMsPtr(v int64) *time.Time {
	if v == 0 {
		return nil
	}
	t := fromMs(v)
	return &t
}

// offset stores an optional time relative to base: 0 is "unset", so
// offsets at or after base are shifted by one; earlier ones (a clock that
// stepped back) are negative and kept as they are.
func offset(t *time.Time, base int64) int64 {
	if t == nil {
		return 0
	}
	if d := t.UnixMilli() - base; d < 0 {
		return d
	} else {
		return d + 1
	}
}

func fromOffset(v, base int64) *time.Time {
	var t time.Time
	switch {
	case v == 0:
		return nil
	case v < 0:
		t = fromMs(base + v)
	default:
		t = fromMs(base + v - 1)
	}
	return &t
}

// decMode reads strings as they were written even when they are not valid
// UTF-8: one bad record must not make a key, a listing or the sweeper fail.
var decMode, _ = cbor.DecOptions{UTF8: cbor.UTF8DecodeInvalid}.DecMode()

func encodeRecord(r *keystore.Record) ([]byte, error) {
	body, err := encodeRecordBody(r)
	if err != nil {
		return nil, err
	}
	return sealRecord(recordKey(r.Namespace, r.Key), body), nil
}

// encodeRecordBody is the CBOR of r, without its seal: a record as
// schema 1 stored it.
func encodeRecordBody(r *keystore.Record) ([]byte, error) {
	base := ms(r.CreatedAt)
	d := diskRecord{
		State: stateCodes[r.State], Attempt: uint32(r.Attempt), Owner: r.Owner, Lease: offset(r.LeaseExpiresAt, base),
		ResultRef: r.ResultRef, Result: recordResult(r), Reason: string(r.Reason), Message: r.Message,
		Retryable: r.Retryable, Via: viaCodes[r.Via], Destination: r.Destination,
		Created: base, Updated: offset(&r.UpdatedAt, base), Expires: offset(r.ExpiresAt, base),
		ResolvedBy: r.ResolvedBy, ResolvedAt: offset(r.ResolvedAt, base), Note: r.Note,
		Fingerprint: r.Fingerprint, TokenHash: append(append([]byte(nil), r.TokenHash...), r.TokenSeal...),
	}
	d.History = make([]diskTransition, len(r.History))
	for i, h := range r.History {
		by := h.By
		switch {
		case by == r.Owner:
			by = ""
		case by == "":
			by = ownerNone
		}
		code, ok := eventCodes[h.Event]
		if !ok {
			return nil, fmt.Errorf("encode record %s/%s: unknown history event %q", r.Namespace, r.Key, h.Event)
		}
		d.History[i] = diskTransition{At: ms(h.At) - base, Event: code, Attempt: uint32(h.Attempt), By: by, Detail: h.Detail}
	}
	// The one place a record is written: its stage is what its fields
	// say (stage.go), whichever path decided it.
	r.Stage = keystore.StageOf(r)
	switch {
	case r.Stage != "":
		return cbor.Marshal(diskRecordStage{diskRecord: d, Summary: r.Summary, Stage: stageCodes[r.Stage]})
	case r.Summary != "":
		return cbor.Marshal(diskRecordSummary{diskRecord: d, Summary: r.Summary})
	}
	return cbor.Marshal(d)
}

// decodeRecord reads a sealed record (checksum.go). A value that fails
// its seal, or passes it and still does not read, is a damaged record:
// keystore.RecordDamaged, never a guess.
func decodeRecord(ns, key string, v []byte) (*keystore.Record, error) {
	body, ok := openSeal(recordKey(ns, key), v)
	if !ok {
		return nil, keystore.RecordDamaged(ns, key)
	}
	r, err := decodeRecordBody(ns, key, body)
	if err != nil {
		return nil, keystore.RecordDamaged(ns, key)
	}
	return r, nil
}

// decodeRecordBody reads the CBOR of a record, without a seal.
func decodeRecordBody(ns, key string, b []byte) (*keystore.Record, error) {
	var ds diskRecordStage
	var err error
	switch arrayLen(b) {
	case recordStageLen:
		err = decMode.Unmarshal(b, &ds)
	case recordSummaryLen:
		var sum diskRecordSummary
		err = decMode.Unmarshal(b, &sum)
		ds.diskRecord, ds.Summary = sum.diskRecord, sum.Summary
	default:
		err = decMode.Unmarshal(b, &ds.diskRecord)
	}
	if err != nil {
		return nil, fmt.Errorf("decode record %s/%s: %w", ns, key, err)
	}
	d := ds.diskRecord
	stage, ok := stageByCode[ds.Stage]
	if !ok && ds.Stage != 0 {
		return nil, fmt.Errorf("decode record %s/%s: unknown stage code %d", ns, key, ds.Stage)
	}
	state, ok := stateByCode[d.State]
	if !ok {
		return nil, fmt.Errorf("decode record %s/%s: unknown state code %d", ns, key, d.State)
	}
	base := d.Created
	r := &keystore.Record{
		Namespace: ns, Key: key, State: state, Attempt: int(d.Attempt), Owner: d.Owner,
		LeaseExpiresAt: fromOffset(d.Lease, base), ResultRef: d.ResultRef, Result: d.Result,
		Reason: keystore.Reason(d.Reason), Message: d.Message, Retryable: d.Retryable, Via: viaByCode[d.Via],
		Destination: d.Destination, CreatedAt: fromMs(base), UpdatedAt: updatedAt(d.Updated, base),
		ExpiresAt: fromOffset(d.Expires, base), ResolvedBy: d.ResolvedBy, ResolvedAt: fromOffset(d.ResolvedAt, base),
		Note: d.Note, Fingerprint: d.Fingerprint, TokenHash: d.TokenHash, Summary: ds.Summary,
	}
	if state == keystore.StateParked || (state == keystore.StateReserved && len(d.Result) > 0) {
		if err := decodePark(r, d.Result); err != nil { // park.go
			return nil, err
		}
	}
	if state == keystore.StateUnknown {
		decodeCheck(r) // reconcile.go
	}
	if len(d.TokenHash) == 2*tokenHashLen {
		r.TokenHash, r.TokenSeal = d.TokenHash[:tokenHashLen], d.TokenHash[tokenHashLen:]
	}
	r.History = make([]keystore.Transition, len(d.History))
	for i, h := range d.History {
		by := h.By
		switch by {
		case "":
			by = d.Owner
		case ownerNone:
			by = ""
		}
		r.History[i] = keystore.Transition{At: fromMs(base + h.At), Event: eventByCode[h.Event], Attempt: int(h.Attempt), By: by, Detail: h.Detail}
	}
	r.Stage = stage
	if ds.Stage == 0 {
		// Written without a stage: by an older release, or with none.
		r.Stage = keystore.StageOf(r)
	}
	return r, nil
}

func updatedAt(v, base int64) time.Time {
	if t := fromOffset(v, base); t != nil {
		return *t
	}
	return fromMs(base)
}

func encodeBreaker(b *keystore.Breaker) ([]byte, error) {
	d := diskBreaker{State: string(b.State), OpenedAt: msPtr(b.OpenedAt), ReopensAt: msPtr(b.ReopensAt),
		Failures: uint32(b.ConsecutiveFailures), Paused: uint32(b.PausedReserves),
		ProbeNamespace: b.ProbeNamespace, ProbeKey: b.ProbeKey, ProbeUntil: msPtr(b.ProbeUntil), FailedKeys: b.FailedKeys,
		Views: keystore.EncodeViews(b.Views), Seen: b.SeenNamespaces, OpenedBy: b.OpenedBy}
	if m := b.Maintenance; m != nil {
		d.HoldBy, d.HoldReason, d.HoldSetAt, d.HoldUntil = m.By, m.Reason, ms(m.SetAt), ms(m.Until)
	}
	if b.Reset != nil {
		d.ResetBy, d.ResetReason, d.ResetAt = b.Reset.By, b.Reset.Reason, ms(b.Reset.At)
	}
	n := breakerBase
	switch {
	case len(b.Views) > 0 || len(b.SeenNamespaces) > 0 || b.OpenedBy != "":
		n = breakerViews
	case len(b.FailedKeys) > 0:
		n = breakerCounted
	case b.Reset != nil:
		n = breakerReset
	case b.Maintenance != nil:
		n = breakerHeld
	}
	return cbor.Marshal(d.fields()[:n])
}

func decodeBreaker(dest string, v []byte) (*keystore.Breaker, error) {
	var raw []cbor.RawMessage
	if err := decMode.Unmarshal(v, &raw); err != nil {
		return nil, fmt.Errorf("decode breaker %s: %w", dest, err)
	}
	var d diskBreaker
	fields := d.fields()
	if len(raw) < breakerBase || len(raw) > len(fields) {
		return nil, fmt.Errorf("decode breaker %s: %d fields, want %d to %d", dest, len(raw), breakerBase, len(fields))
	}
	for i, r := range raw {
		if err := decMode.Unmarshal(r, fields[i]); err != nil {
			return nil, fmt.Errorf("decode breaker %s, field %d: %w", dest, i, err)
		}
	}
	b := &keystore.Breaker{Destination: dest, State: keystore.BreakerState(d.State), OpenedAt: fromMsPtr(d.OpenedAt),
		ReopensAt: fromMsPtr(d.ReopensAt), ConsecutiveFailures: int(d.Failures), PausedReserves: int(d.Paused),
		ProbeNamespace: d.ProbeNamespace, ProbeKey: d.ProbeKey, ProbeUntil: fromMsPtr(d.ProbeUntil), FailedKeys: d.FailedKeys, SeenNamespaces: d.Seen, OpenedBy: d.OpenedBy}
	views, err := keystore.DecodeViews(d.Views)
	if err != nil {
		return nil, fmt.Errorf("decode breaker %s, views: %w", dest, err)
	}
	b.Views = views
	if d.HoldBy != "" {
		b.Maintenance = &keystore.Maintenance{By: d.HoldBy, Reason: d.HoldReason, SetAt: fromMs(d.HoldSetAt), Until: fromMs(d.HoldUntil)}
	}
	if d.ResetBy != "" {
		b.Reset = &keystore.BreakerReset{By: d.ResetBy, Reason: d.ResetReason, At: fromMs(d.ResetAt)}
	}
	return b, nil
}

func encodeEvent(e keystore.Event) ([]byte, error) {
	base := eventBaseLayout{At: ms(e.At), Kind: string(e.Kind), Namespace: e.Namespace, Key: e.Key,
		Attempt: uint32(e.Attempt), Owner: e.Owner, Destination: e.Destination, Reason: string(e.Reason),
		Message: e.Message, ReopensAt: msPtr(e.ReopensAt), Paused: uint32(e.PausedReserves)}
	switch {
	case e.Resumed != 0 || e.Lost != 0 || e.Took != 0:
		return cbor.Marshal(eventCatchUpLayout{eventSummaryLayout: eventSummaryLayout{eventBaseLayout: base, Bulk: e.Bulk, Summary: e.Summary},
			Resumed: uint32(e.Resumed), Lost: uint32(e.Lost), Took: e.Took.Milliseconds()})
	case e.Summary != "":
		return cbor.Marshal(eventSummaryLayout{eventBaseLayout: base, Bulk: e.Bulk, Summary: e.Summary})
	case e.Bulk != "":
		return cbor.Marshal(eventBulkLayout{eventBaseLayout: base, Bulk: e.Bulk})
	}
	return cbor.Marshal(base)
}

// The layouts an event is written in (eventBase, eventBulk, eventSummary
// and eventCatchUp items): structs encoded as arrays, which cost a fraction
// of encoding a slice of fields (a bulk writes one event per key). Each
// embeds the one before, so the items come in the order fields lists them.
type eventBaseLayout struct {
	_           struct{} `cbor:",toarray"`
	At          int64
	Kind        string
	Namespace   string
	Key         string
	Attempt     uint32
	Owner       string
	Destination string
	Reason      string
	Message     string
	ReopensAt   int64
	Paused      uint32
}

type eventBulkLayout struct {
	_ struct{} `cbor:",toarray"`
	eventBaseLayout
	Bulk string
}

type eventSummaryLayout struct {
	_ struct{} `cbor:",toarray"`
	eventBaseLayout
	Bulk    string
	Summary string
}

type eventCatchUpLayout struct {
	_ struct{} `cbor:",toarray"`
	eventSummaryLayout
	Resumed uint32
	Lost    uint32
	Took    int64 // ms
}

// decodeEvent reads either layout: fxamacker/cbor refuses an array of
// another length for a toarray struct, so the fields are read one by one.
func decodeEvent(seq uint64, v []byte) (keystore.Event, error) {
	var raw []cbor.RawMessage
	if err := decMode.Unmarshal(v, &raw); err != nil {
		return keystore.Event{}, fmt.Errorf("decode event %d: %w", seq, err)
	}
	var d eventCatchUpLayout
	fields := d.fields()
	if len(raw) < eventBase || len(raw) > len(fields) {
		return keystore.Event{}, fmt.Errorf("decode event %d: %d fields, want %d to %d", seq, len(raw), eventBase, len(fields))
	}
	for i, r := range raw {
		if err := decMode.Unmarshal(r, fields[i]); err != nil {
			return keystore.Event{}, fmt.Errorf("decode event %d, field %d: %w", seq, i, err)
		}
	}
	return keystore.Event{Seq: seq, At: fromMs(d.At), Kind: keystore.EventKind(d.Kind), Namespace: d.Namespace, Key: d.Key,
		Attempt: int(d.Attempt), Owner: d.Owner, Destination: d.Destination, Reason: keystore.Reason(d.Reason),
		Message: d.Message, ReopensAt: fromMsPtr(d.ReopensAt), PausedReserves: int(d.Paused), Bulk: d.Bulk, Summary: d.Summary,
		Resumed: int(d.Resumed), Lost: int(d.Lost), Took: time.Duration(d.Took) * time.Millisecond}, nil
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}
