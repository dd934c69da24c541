package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Outcome is how one attempt ended.
type Outcome string

const (
	OutcomeRunning     Outcome = "running" // started; not known to have ended
	OutcomeSucceeded   Outcome = "succeeded"
	OutcomeFailed      Outcome = "failed" // the process exited non-zero or was killed
	OutcomeTimedOut    Outcome = "timed_out"
	OutcomeError       Outcome = "error"       // the executor could not run it
	OutcomeInterrupted Outcome = "interrupted" // its apply was interrupted and killed it, or died and its leftovers were cleaned up
)

// Attempt is one execution of a node by an executor.
type Attempt struct {
	RunID       string
	Address     string
	N           int // 1, 2, … within the node and run
	Executor    string
	ContainerID string // the executor's ID (or ID prefix) for everything it created
	Started     time.Time
	Finished    time.Time
	Outcome     Outcome
	Detail      string
}

// AttemptStarted records a new attempt of a node and returns its number. The engine must
// call it — and it must have returned — before the executor creates anything named by
// containerID, so that a crash at any later point leaves a row that names the leftovers.
func (d *DB) AttemptStarted(ctx context.Context, runID, address, executor, containerID string) (int, error) {
	if containerID == "" {
		return 0, fmt.Errorf("state: start attempt of %s: empty container ID", address)
	}
	var n int
	err := d.tx(ctx, "start attempt of "+address, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(n), 0) + 1 FROM attempts WHERE run_id = ? AND address = ?`, runID, address).Scan(&n); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO attempts (run_id, address, n, executor, container_id, started, outcome) VALUES (?, ?, ?, ?, ?, ?, 'running')`,
			runID, address, n, executor, containerID, nanos(time.Now()))
		if err != nil {
			return fmt.Errorf("attempt %d (is node %s recorded in run %s?): %w", n, address, runID, err)
		}
		return nil
	})
	return n, err
}

// AttemptFinished records how an attempt ended.
func (d *DB) AttemptFinished(ctx context.Context, runID, address string, n int, outcome Outcome, detail string) error {
	switch outcome {
	case OutcomeSucceeded, OutcomeFailed, OutcomeTimedOut, OutcomeError, OutcomeInterrupted:
	default:
		return fmt.Errorf("state: finish attempt %d of %s: %q is not a final outcome", n, address, outcome)
	}
	return d.tx(ctx, fmt.Sprintf("finish attempt %d of %s", n, address), func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE attempts SET outcome = ?, detail = ?, finished = ? WHERE run_id = ? AND address = ? AND n = ?`,
			string(outcome), detail, nanos(time.Now()), runID, address, n)
		if err != nil {
			return err
		}
		if c, _ := r.RowsAffected(); c == 0 {
			return fmt.Errorf("attempt %d of %s in run %s: %w", n, address, runID, ErrNotFound)
		}
		return nil
	})
}

const attemptColumns = `run_id, address, n, executor, container_id, started, finished, outcome, detail`

func scanAttempt(s interface{ Scan(...any) error }) (Attempt, error) {
	var (
		a                 Attempt
		started, finished sql.NullInt64
		outcome           string
	)
	if err := s.Scan(&a.RunID, &a.Address, &a.N, &a.Executor, &a.ContainerID, &started, &finished, &outcome, &a.Detail); err != nil {
		return Attempt{}, err
	}
	a.Started, a.Finished, a.Outcome = fromNanos(started), fromNanos(finished), Outcome(outcome)
	return a, nil
}

// Attempts lists the attempts of one node in one run, in order.
func (d *DB) Attempts(ctx context.Context, runID, address string) ([]Attempt, error) {
	return d.queryAttempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE run_id = ? AND address = ? ORDER BY n`, runID, address)
}

// InterruptedAttempts lists the attempts still marked running whose run is no longer alive
// (its process died: kill -9, crash, reboot). Their ContainerID prefixes name what the
// executor must clean up; afterwards close each with AttemptFinished(OutcomeInterrupted).
// Attempts of runs that are alive — this process's or another apply's — are never listed.
func (d *DB) InterruptedAttempts(ctx context.Context) ([]Attempt, error) {
	all, err := d.queryAttempts(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE outcome = 'running' ORDER BY run_id, address, n`)
	if err != nil {
		return nil, err
	}
	var out []Attempt
	alive := map[string]bool{}
	for _, a := range all {
		live, ok := alive[a.RunID]
		if !ok {
			if live, err = d.runAlive(a.RunID); err != nil {
				return nil, err
			}
			alive[a.RunID] = live
		}
		if !live {
			out = append(out, a)
		}
	}
	return out, nil
}

func (d *DB) queryAttempts(ctx context.Context, q string, args ...any) ([]Attempt, error) {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("state: list attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("state: list attempts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: list attempts: %w", err)
	}
	return out, nil
}
