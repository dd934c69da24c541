package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
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
	// Decision is how an operator resolved the effect when it was unknown (DecideEffect);
	// nil when nobody did. It stays when the engine moves the effect on.
	Decision *EffectDecision
}

// EffectDecision is an operator's resolution of an unknown effect.
type EffectDecision struct {
	Status EffectStatus // succeeded or failed
	By     string       // who decided (user@host)
	At     time.Time
	Reason string // why: what the operator found out
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
		st, err := effectStatus(ctx, tx, id)
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

// diedAfterDispatch is the result of an effect parked as unknown.
const diedAfterDispatch = "the run's process died after dispatch"

// parkEffects marks unknown the effects that the dead run runID had dispatched.
func parkEffects(ctx context.Context, tx *sql.Tx, runID string, now sql.NullInt64) error {
	_, err := tx.ExecContext(ctx, `UPDATE effects SET status = 'unknown', result = ?, updated = ? WHERE run_id = ? AND status = 'dispatched'`,
		diedAfterDispatch, now, runID)
	return err
}

// ParkEffects marks unknown every dispatched effect whose run is no longer alive, as
// RecoverRuns does, without touching the runs themselves (their nodes, attempts and
// containers are the next apply's to recover). A command that shows or resolves effects
// calls it, so that it sees a publish cut short by a killed apply as unknown before any
// apply ran again. It returns how many effects it parked.
func (d *DB) ParkEffects(ctx context.Context) (int, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT DISTINCT run_id FROM effects WHERE status = 'dispatched'`)
	if err != nil {
		return 0, fmt.Errorf("state: park effects: %w", err)
	}
	var runs []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("state: park effects: %w", err)
		}
		runs = append(runs, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("state: park effects: %w", err)
	}
	parked := 0
	for _, id := range runs {
		alive, err := d.runAlive(id)
		if err != nil {
			return parked, err
		}
		if alive {
			continue
		}
		err = d.tx(ctx, "park the effects of run "+id, func(tx *sql.Tx) error {
			// A dead run stays dead, so its dispatched effects are unknown for good.
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE run_id = ? AND status = 'dispatched'`, id).Scan(&n); err != nil {
				return err
			}
			parked += n
			return parkEffects(ctx, tx, id, nanos(time.Now()))
		})
		if err != nil {
			return parked, err
		}
	}
	return parked, nil
}

// ErrNotUnknown is returned (wrapped) by DecideEffect for an effect that is not unknown:
// only an outcome nobody knows is decided by hand.
var ErrNotUnknown = errors.New("not unknown")

// DecideEffect records an operator's resolution of an unknown effect: it moves the effect to
// dec.Status — succeeded, with result saying what it produced, or failed, which lets the
// engine perform it again — and keeps who decided, when and why. Like every row it only
// indexes: a succeeded publish is still published again when the plan finds no admitted
// version. An effect that is not unknown is refused with ErrNotUnknown;
// one that does not exist with ErrNotFound.
func (d *DB) DecideEffect(ctx context.Context, id string, dec EffectDecision, result string) error {
	if dec.Status != EffectSucceeded && dec.Status != EffectFailed {
		return fmt.Errorf("state: decide effect %s: %q is not an outcome (succeeded or failed)", id, dec.Status)
	}
	if dec.By == "" || dec.Reason == "" {
		return fmt.Errorf("state: decide effect %s: who decided and why are required", id)
	}
	if dec.At.IsZero() {
		dec.At = time.Now()
	}
	return d.tx(ctx, "decide effect "+id, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE effects SET status = ?, result = ?, updated = ?, decision = ?, decided_by = ?, decided = ?, decision_reason = ?
WHERE id = ? AND status = 'unknown'`, string(dec.Status), result, nanos(dec.At), string(dec.Status), dec.By, nanos(dec.At), dec.Reason, id)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 1 {
			return nil
		}
		st, err := effectStatus(ctx, tx, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("effect %s is %s, %w", id, st, ErrNotUnknown)
	})
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

// effectStatus is the status of effect id, for saying why a transition did not apply.
func effectStatus(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	var st string
	err := tx.QueryRowContext(ctx, `SELECT status FROM effects WHERE id = ?`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("effect %s: %w", id, ErrNotFound)
	}
	return st, err
}

const effectColumns = `id, run_id, address, kind, destination, status, result, created, updated, decision, decided_by, decided, decision_reason`

func scanEffect(s interface{ Scan(...any) error }) (Effect, error) {
	var (
		e                         Effect
		status                    string
		created, updated, decided sql.NullInt64
		dec                       EffectDecision
		decision                  string
	)
	if err := s.Scan(&e.ID, &e.RunID, &e.Address, &e.Kind, &e.Destination, &status, &e.Result, &created, &updated,
		&decision, &dec.By, &decided, &dec.Reason); err != nil {
		return Effect{}, err
	}
	e.Status, e.Created, e.Updated = EffectStatus(status), fromNanos(created), fromNanos(updated)
	if decision != "" {
		dec.Status, dec.At = EffectStatus(decision), fromNanos(decided)
		e.Decision = &dec
	}
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
