package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// Quarantined is a digest the operator has withdrawn: plan and apply refuse it.
type Quarantined struct {
	Digest digest.Digest
	Reason string
	Added  time.Time
}

// QuarantineAdd quarantines a digest. Adding one that is already quarantined updates the
// reason and keeps the original time.
func (d *DB) QuarantineAdd(ctx context.Context, dg digest.Digest, reason string) error {
	if _, err := digest.Parse(string(dg)); err != nil {
		return fmt.Errorf("state: quarantine %q: %w", dg, err)
	}
	if strings.TrimSpace(reason) == "" {
		return fmt.Errorf("state: quarantine %s: a reason is required", dg)
	}
	return d.tx(ctx, "quarantine "+string(dg), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO quarantine (digest, reason, added) VALUES (?, ?, ?) ON CONFLICT (digest) DO UPDATE SET reason = excluded.reason`,
			string(dg), reason, nanos(time.Now()))
		return err
	})
}

// QuarantineRemove lifts a quarantine; removed is false if the digest was not quarantined.
func (d *DB) QuarantineRemove(ctx context.Context, dg digest.Digest) (removed bool, err error) {
	err = d.tx(ctx, "unquarantine "+string(dg), func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM quarantine WHERE digest = ?`, string(dg))
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		removed = n > 0
		return nil
	})
	return removed, err
}

// QuarantineList lists quarantined digests, oldest first.
func (d *DB) QuarantineList(ctx context.Context) ([]Quarantined, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT digest, reason, added FROM quarantine ORDER BY added, digest`)
	if err != nil {
		return nil, fmt.Errorf("state: list quarantine: %w", err)
	}
	defer rows.Close()
	var out []Quarantined
	for rows.Next() {
		var (
			q     Quarantined
			dg    string
			added sql.NullInt64
		)
		if err := rows.Scan(&dg, &q.Reason, &added); err != nil {
			return nil, fmt.Errorf("state: list quarantine: %w", err)
		}
		q.Digest, q.Added = digest.Digest(dg), fromNanos(added)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: list quarantine: %w", err)
	}
	return out, nil
}

// IsQuarantined reports whether a digest is quarantined, and why.
func (d *DB) IsQuarantined(ctx context.Context, dg digest.Digest) (bool, string, error) {
	var reason string
	err := d.db.QueryRowContext(ctx, `SELECT reason FROM quarantine WHERE digest = ?`, string(dg)).Scan(&reason)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("state: check quarantine of %s: %w", dg, err)
	}
	return true, reason, nil
}

// QuarantinedAmong returns, in one query, which of the given digests are quarantined and
// why (plan time checks a whole graph at once).
func (d *DB) QuarantinedAmong(ctx context.Context, ds []digest.Digest) (map[digest.Digest]string, error) {
	out := map[digest.Digest]string{}
	if len(ds) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(ds)
	if err != nil {
		return nil, fmt.Errorf("state: check quarantine: %w", err)
	}
	rows, err := d.db.QueryContext(ctx, `SELECT digest, reason FROM quarantine WHERE digest IN (SELECT value FROM json_each(?))`, string(arr))
	if err != nil {
		return nil, fmt.Errorf("state: check quarantine of %d digests: %w", len(ds), err)
	}
	defer rows.Close()
	for rows.Next() {
		var dg, reason string
		if err := rows.Scan(&dg, &reason); err != nil {
			return nil, fmt.Errorf("state: check quarantine: %w", err)
		}
		out[digest.Digest(dg)] = reason
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: check quarantine: %w", err)
	}
	return out, nil
}
