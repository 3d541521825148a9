package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"

	bbolt "go.etcd.io/bbolt"
)

// Every record carries a checksum. bbolt checksums its meta pages only: a
// flipped byte inside a record's value reads back as another record (a
// completed key turned failed and retryable is accepted again). So each
// value is sealed:
//
//	0x01 | crc32c(record key, 0x01, body) uint32 | body (the CBOR)
//
// The checksum covers the record's key too, so a value that lands under
// another key (a damaged branch page) fails as well. A value that fails
// its seal is never decided on: the key answers record_damaged and
// nothing is written over it.
//
// Schema 1 stored the bare CBOR (a CBOR array starts with 0x8_ or 0x9_,
// never 0x01). Open seals a schema-1 file's records once (sealRecords) and
// then sets schema 2; from then on a bare value is damage like any other.

const sealFormat = 0x01

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealLen is what a seal adds to a record's body.
const sealLen = 5

func sealSum(rk, body []byte) uint32 {
	sum := crc32.Update(crc32.Checksum(rk, castagnoli), castagnoli, []byte{sealFormat})
	return crc32.Update(sum, castagnoli, body)
}

// sealRecord returns body sealed for the record key rk.
func sealRecord(rk, body []byte) []byte {
	v := make([]byte, sealLen, sealLen+len(body))
	v[0] = sealFormat
	binary.BigEndian.PutUint32(v[1:], sealSum(rk, body))
	return append(v, body...)
}

// openSeal returns the body of the sealed value v of record key rk, and
// whether its seal holds.
func openSeal(rk, v []byte) ([]byte, bool) {
	if len(v) < sealLen || v[0] != sealFormat {
		return nil, false
	}
	body := v[sealLen:]
	return body, binary.BigEndian.Uint32(v[1:]) == sealSum(rk, body)
}

// sealBatch bounds the records sealed by one transaction of the upgrade.
const sealBatch = 10000

// sealRecords seals every record of a schema-1 file, in transactions of
// sealBatch records, and returns how many it sealed and how many it could
// not read (left as they are: they answer record_damaged). It can stop
// anywhere: a sealed value is skipped when it runs again.
func sealRecords(db *bbolt.DB) (sealed, unreadable int, err error) {
	var after []byte
	for {
		type change struct{ k, v []byte }
		var batch []change
		done := false
		err := db.Update(func(tx *bbolt.Tx) error {
			keys := tx.Bucket(bucketKeys)
			c := keys.Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(batch) < sealBatch; k, v = c.Next() {
				after = append(after[:0], k...)
				if _, ok := openSeal(k, v); ok {
					continue
				}
				ns, key := splitRecordKey(k)
				if _, err := decodeRecordBody(ns, key, v); err != nil || len(v) > 0 && v[0] == sealFormat {
					unreadable++
					continue
				}
				batch = append(batch, change{bytes.Clone(k), sealRecord(k, v)})
			}
			done = k == nil
			// Written after the walk: a cursor must not walk a bucket
			// it changes.
			for _, ch := range batch {
				if err := keys.Put(ch.k, ch.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return sealed, unreadable, err
		}
		sealed += len(batch)
		if done {
			return sealed, unreadable, nil
		}
	}
}

// upgradeSchema seals the records of a schema-1 file and sets the
// current schema, with one line saying how many records it sealed. A
// schema-2 file (sealed, no stages yet) only gets the schema: its stage
// index is built by prepare (backfillStage).
func upgradeSchema(db *bbolt.DB, path string, log *slog.Logger) error {
	var schema uint64
	err := db.View(func(tx *bbolt.Tx) error {
		if v := bucketValue(tx, bucketMeta, metaSchema); len(v) == 8 {
			schema = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil || schema >= schemaVersion {
		return err
	}
	if schema >= 2 {
		if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion)) }); err != nil {
			return fmt.Errorf("store %s: %w", path, err)
		}
		return nil
	}
	sealed, unreadable, err := sealRecords(db)
	if err != nil {
		return fmt.Errorf("store %s: add checksums to the records of a file from an older version: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion)) }); err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	log.Info("store: added a checksum to every record of a file from an older version (schema 1 to 3), once", "path", path, "records", sealed, "unreadable", unreadable)
	if unreadable > 0 {
		log.Error("store: records of the older file could not be read and were left as they are; their keys answer record_damaged", "path", path, "records", unreadable)
	}
	return nil
}
