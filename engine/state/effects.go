package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/engine/digest"
)

// EffectStatus is the state of one external effect in the outbox.
type EffectStatus string

const (
	EffectIntended   EffectStatus = "intended"   // recorded, not yet attempted
	EffectDispatched EffectStatus = "dispatched" // being performed; outcome not yet recorded
	EffectSucceeded  EffectStatus = "succeeded"
	EffectFailed     EffectStatus = "failed"  // known not to have happened; may be retried
	EffectUnknown    EffectStatus = "unknown" // dispatched by a run that died: never retried blindly
)

// Effect is one external effect (publish, deliver) under its logical action ID.
type Effect struct {
	ID          string // EffectID of project, revision, node, kind and destination
	RunID       string // the run that last recorded or dispatched it
	Address     string
	Kind        string // "publish", "deliver", …
	Destination string
	Status      EffectStatus
	Result      string // what the outcome was (a digest, a URL) or why it is unknown
	Created     time.Time
	Updated     time.Time
}

// EffectID derives an effect's logical action ID deterministically from what identifies it,
// so a retry — in this run or after a crash — finds the same row.
func EffectID(project, revision, address, kind, destination string) (string, error) {
	d, _, err := digest.Of([]string{"foundry-effect/v1", project, revision, address, kind, destination})
	if err != nil {
		return "", fmt.Errorf("state: effect id: %w", err)
	}
	return "eff-" + d.Hex(), nil
}

// EffectIntent records the intent to perform an effect before anything is dispatched. If
// the effect is already recorded (same ID) it returns the existing row and created=false:
// the caller must then act on its status — skip a succeeded one, and never retry an
// unknown one until it is resolved.
func (d *DB) EffectIntent(ctx context.Context, e Effect) (Effect, bool, error) {
	if e.ID == "" || e.RunID == "" || e.Kind == "" {
		return Effect{}, false, fmt.Errorf("state: effect intent: ID, run and kind are required")
	}
	var created bool
	now := nanos(time.Now())
	err := d.tx(ctx, "record intent of effect "+e.ID, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO effects (id, run_id, address, kind, destination, status, created, updated)
VALUES (?, ?, ?, ?, ?, 'intended', ?, ?) ON CONFLICT (id) DO NOTHING`, e.ID, e.RunID, e.Address, e.Kind, e.Destination, now, now)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		created = n == 1
		return nil
	})
	if err != nil {
		return Effect{}, false, err
	}
	got, err := d.GetEffect(ctx, e.ID)
	return got, created, err
}

// EffectDispatching claims an effect for dispatch by runID: it moves it from intended (or
// failed, for a retry) to dispatched in one compare-and-set. It fails if the effect
// succeeded, is unknown, or is being dispatched by another run; only then may the caller
// perform the effect, with the effect ID as its idempotency key.
func (d *DB) EffectDispatching(ctx context.Context, id, runID string) error {
	return d.tx(ctx, "dispatch effect "+id, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE effects SET status = 'dispatched', run_id = ?, result = '', updated = ?
WHERE id = ? AND status IN ('intended','failed')`, runID, nanos(time.Now()), id)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 1 {
			return nil
		}
		var st string
		err = tx.QueryRowContext(ctx, `SELECT status FROM effects WHERE id = ?`, id).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("effect %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("effect %s is %s, not ready to dispatch", id, st)
	})
}

// EffectFinished records the outcome of a dispatched effect (succeeded or failed).
func (d *DB) EffectFinished(ctx context.Context, id string, status EffectStatus, result string) error {
	return d.settleEffect(ctx, id, status, result, EffectDispatched)
}

// ResolveEffect settles an unknown effect once a reconciler or the operator has found out
// what happened (succeeded, or failed so that it may be retried).
func (d *DB) ResolveEffect(ctx context.Context, id string, status EffectStatus, result string) error {
	return d.settleEffect(ctx, id, status, result, EffectUnknown)
}

func (d *DB) settleEffect(ctx context.Context, id string, status EffectStatus, result string, from EffectStatus) error {
	if status != EffectSucceeded && status != EffectFailed {
		return fmt.Errorf("state: settle effect %s: %q is not an outcome", id, status)
	}
	return d.tx(ctx, "settle effect "+id, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE effects SET status = ?, result = ?, updated = ? WHERE id = ? AND status = ?`,
			string(status), result, nanos(time.Now()), id, string(from))
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("effect %s is not %s", id, from)
		}
		return nil
	})
}

const effectColumns = `id, run_id, address, kind, destination, status, result, created, updated`

func scanEffect(s interface{ Scan(...any) error }) (Effect, error) {
	var (
		e                Effect
		status           string
		created, updated sql.NullInt64
	)
	if err := s.Scan(&e.ID, &e.RunID, &e.Address, &e.Kind, &e.Destination, &status, &e.Result, &created, &updated); err != nil {
		return Effect{}, err
	}
	e.Status, e.Created, e.Updated = EffectStatus(status), fromNanos(created), fromNanos(updated)
	return e, nil
}

// GetEffect returns one effect.
func (d *DB) GetEffect(ctx context.Context, id string) (Effect, error) {
	e, err := scanEffect(d.db.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM effects WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Effect{}, fmt.Errorf("state: effect %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Effect{}, fmt.Errorf("state: effect %s: %w", id, err)
	}
	return e, nil
}

// Effects lists the effects with the given status (all when status is empty), oldest first.
func (d *DB) Effects(ctx context.Context, status EffectStatus) ([]Effect, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+effectColumns+` FROM effects WHERE ? = '' OR status = ? ORDER BY created, id`, string(status), string(status))
	if err != nil {
		return nil, fmt.Errorf("state: list effects: %w", err)
	}
	defer rows.Close()
	var out []Effect
	for rows.Next() {
		e, err := scanEffect(rows)
		if err != nil {
			return nil, fmt.Errorf("state: list effects: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: list effects: %w", err)
	}
	return out, nil
}
