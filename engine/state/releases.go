package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Release is one release of a product delivered to a destination (spec/state.md, table
// releases): Seq orders a destination's releases by when they were first delivered.
type Release struct {
	Seq         int64
	Product     string // its address, product.P
	Destination string // as the deliver block names it, dir:/srv/releases
	Release     string // the release digest, sha256:<hex> of its release.json
	Location    string // where it is, dir:/srv/releases/<hex>
	Receipt     string // the envelope digest of its delivery receipt, when known
	Delivered   time.Time
}

// Channel is where a product's channel at a destination points: the release it serves now.
type Channel struct {
	Product     string
	Destination string
	Release     string
	Moved       time.Time
	Reason      string // "delivered", or "rollback from <digest>"
}

// RecordRelease records rel, delivered now. A release already recorded for its product and
// destination keeps its row and sequence, and created is false: only a release new to the
// destination moves the channel (the caller does, with MoveChannel).
func (d *DB) RecordRelease(ctx context.Context, rel Release) (Release, bool, error) {
	if rel.Product == "" || rel.Destination == "" || rel.Release == "" {
		return Release{}, false, fmt.Errorf("state: record release: product, destination and release are required")
	}
	var created bool
	err := d.tx(ctx, "record release "+rel.Release, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO releases (product, destination, release, location, receipt, delivered)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (product, destination, release) DO NOTHING`,
			rel.Product, rel.Destination, rel.Release, rel.Location, rel.Receipt, nanos(time.Now()))
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		created = n == 1
		return nil
	})
	if err != nil {
		return Release{}, false, err
	}
	got, err := d.ReleaseOf(ctx, rel.Product, rel.Destination, rel.Release)
	return got, created, err
}

// ErrNoRelease is returned for a release that is not recorded.
var ErrNoRelease = errors.New("no such release")

// ReleaseOf is the recorded release of product to destination with digest release.
func (d *DB) ReleaseOf(ctx context.Context, product, destination, release string) (Release, error) {
	rs, err := d.queryReleases(ctx, `WHERE product = ? AND destination = ? AND release = ?`, product, destination, release)
	if err != nil {
		return Release{}, err
	}
	if len(rs) == 0 {
		return Release{}, fmt.Errorf("state: release %s of %s to %s: %w", release, product, destination, ErrNoRelease)
	}
	return rs[0], nil
}

// Releases lists the recorded releases, by product, destination and sequence.
func (d *DB) Releases(ctx context.Context) ([]Release, error) {
	return d.queryReleases(ctx, ``)
}

func (d *DB) queryReleases(ctx context.Context, where string, args ...any) ([]Release, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT seq, product, destination, release, location, receipt, delivered FROM releases `+where+
		` ORDER BY product, destination, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("state: list releases: %w", err)
	}
	defer rows.Close()
	var out []Release
	for rows.Next() {
		var r Release
		var at sql.NullInt64
		if err := rows.Scan(&r.Seq, &r.Product, &r.Destination, &r.Release, &r.Location, &r.Receipt, &at); err != nil {
			return nil, fmt.Errorf("state: list releases: %w", err)
		}
		r.Delivered = fromNanos(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// MoveChannel points the channel of product at destination to release, which must be
// recorded there.
func (d *DB) MoveChannel(ctx context.Context, product, destination, release, reason string) error {
	return d.tx(ctx, "move the channel of "+product, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM releases WHERE product = ? AND destination = ? AND release = ?`,
			product, destination, release).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("release %s of %s to %s: %w", release, product, destination, ErrNoRelease)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO release_channels (product, destination, release, moved, reason) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (product, destination) DO UPDATE SET release = excluded.release, moved = excluded.moved, reason = excluded.reason`,
			product, destination, release, nanos(time.Now()), reason)
		return err
	})
}

// Channels lists the channels, by product and destination.
func (d *DB) Channels(ctx context.Context) ([]Channel, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT product, destination, release, moved, reason FROM release_channels ORDER BY product, destination`)
	if err != nil {
		return nil, fmt.Errorf("state: list channels: %w", err)
	}
	defer rows.Close()
	var out []Channel
	for rows.Next() {
		var c Channel
		var at sql.NullInt64
		if err := rows.Scan(&c.Product, &c.Destination, &c.Release, &at, &c.Reason); err != nil {
			return nil, fmt.Errorf("state: list channels: %w", err)
		}
		c.Moved = fromNanos(at)
		out = append(out, c)
	}
	return out, rows.Err()
}
