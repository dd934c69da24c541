package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// The action_cache table holds engine/cache's records as opaque bytes keyed by action
// digest. It lives in the state database rather than in one file per entry so that a no-op
// apply looks up its whole graph in one query (json_each over the digests) instead of
// opening thousands of files; engine/cache owns what the bytes mean and when a record may
// be written.

// PutActionRecord stores (or replaces) the record for an action in one transaction.
func (d *DB) PutActionRecord(ctx context.Context, action digest.Digest, record []byte) error {
	return d.tx(ctx, "store action record "+string(action), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO action_cache (action_digest, record, stored) VALUES (?, ?, ?)
ON CONFLICT (action_digest) DO UPDATE SET record = excluded.record, stored = excluded.stored`,
			string(action), record, nanos(time.Now()))
		return err
	})
}

// ActionRecordEntry is one record for PutActionRecords.
type ActionRecordEntry struct {
	Action digest.Digest
	Record []byte
}

// PutActionRecords stores many records in one transaction (one fsync).
func (d *DB) PutActionRecords(ctx context.Context, recs []ActionRecordEntry) error {
	now := nanos(time.Now())
	return d.tx(ctx, fmt.Sprintf("store %d action records", len(recs)), func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO action_cache (action_digest, record, stored) VALUES (?, ?, ?)
ON CONFLICT (action_digest) DO UPDATE SET record = excluded.record, stored = excluded.stored`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, r := range recs {
			if _, err := st.ExecContext(ctx, string(r.Action), r.Record, now); err != nil {
				return fmt.Errorf("action %s: %w", r.Action, err)
			}
		}
		return nil
	})
}

// UpdateActionRecord replaces an action's record with fn(old) inside one write
// transaction, so concurrent updates (attestations added by several signers) are not
// lost. It returns an error wrapping ErrNotFound if the action has no record.
func (d *DB) UpdateActionRecord(ctx context.Context, action digest.Digest, fn func(old []byte) ([]byte, error)) error {
	return d.tx(ctx, "update action record "+string(action), func(tx *sql.Tx) error {
		var old []byte
		err := tx.QueryRowContext(ctx, `SELECT record FROM action_cache WHERE action_digest = ?`, string(action)).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("action %s: %w", action, ErrNotFound)
		}
		if err != nil {
			return err
		}
		rec, err := fn(old)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE action_cache SET record = ?, stored = ? WHERE action_digest = ?`, rec, nanos(time.Now()), string(action))
		return err
	})
}

// ActionRecord returns the record stored for one action.
func (d *DB) ActionRecord(ctx context.Context, action digest.Digest) ([]byte, bool, error) {
	var rec []byte
	err := d.db.QueryRowContext(ctx, `SELECT record FROM action_cache WHERE action_digest = ?`, string(action)).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: action record %s: %w", action, err)
	}
	return rec, true, nil
}

// ActionRecords returns, in one query, the records stored for any of the given actions;
// actions without a record are absent from the map.
func (d *DB) ActionRecords(ctx context.Context, actions []digest.Digest) (map[digest.Digest][]byte, error) {
	out := make(map[digest.Digest][]byte, len(actions))
	if len(actions) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(actions)
	if err != nil {
		return nil, fmt.Errorf("state: action records: %w", err)
	}
	rows, err := d.db.QueryContext(ctx, `SELECT action_digest, record FROM action_cache WHERE action_digest IN (SELECT value FROM json_each(?))`, string(arr))
	if err != nil {
		return nil, fmt.Errorf("state: action records of %d actions: %w", len(actions), err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			a   string
			rec []byte
		)
		if err := rows.Scan(&a, &rec); err != nil {
			return nil, fmt.Errorf("state: action records: %w", err)
		}
		out[digest.Digest(a)] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: action records: %w", err)
	}
	return out, nil
}

// DeleteActionRecord removes an action's record; deleted is false if there was none.
func (d *DB) DeleteActionRecord(ctx context.Context, action digest.Digest) (deleted bool, err error) {
	err = d.tx(ctx, "delete action record "+string(action), func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM action_cache WHERE action_digest = ?`, string(action))
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		deleted = n > 0
		return nil
	})
	return deleted, err
}

// EachActionRecord calls fn for every stored record (for GC roots and `foundry cache ls`).
// fn must not write to the database.
func (d *DB) EachActionRecord(ctx context.Context, fn func(action digest.Digest, record []byte) error) error {
	rows, err := d.db.QueryContext(ctx, `SELECT action_digest, record FROM action_cache ORDER BY action_digest`)
	if err != nil {
		return fmt.Errorf("state: scan action records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			a   string
			rec []byte
		)
		if err := rows.Scan(&a, &rec); err != nil {
			return fmt.Errorf("state: scan action records: %w", err)
		}
		if err := fn(digest.Digest(a), rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("state: scan action records: %w", err)
	}
	return nil
}
