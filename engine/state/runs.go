package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// RunStatus is the state of a whole apply.
type RunStatus string

const (
	RunRunning     RunStatus = "running"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunInterrupted RunStatus = "interrupted" // stopped by a signal, or its process died before FinishRun (RecoverRuns)
)

// Run is one apply.
type Run struct {
	ID       string        `json:"id"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"` // zero while running
	Status   RunStatus     `json:"status"`
	Plan     digest.Digest `json:"plan_digest"` // digest of the plan the run applied
	Args     []string      `json:"args"`        // the command line, for `foundry status`
	Host     string        `json:"host"`
	PID      int           `json:"pid"`
}

// BeginRun records a new run and takes its run lock, which this process holds until
// FinishRun or Close (or until it dies: the kernel releases the lock, and the run then
// counts as interrupted).
func (d *DB) BeginRun(ctx context.Context, plan digest.Digest, args []string) (*Run, error) {
	now := time.Now().UTC()
	id, err := newRunID(now)
	if err != nil {
		return nil, err
	}
	if args == nil {
		args = []string{}
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("state: begin run: encode args: %w", err)
	}
	host, _ := os.Hostname()
	r := &Run{ID: id, Started: now, Status: RunRunning, Plan: plan, Args: args, Host: host, PID: os.Getpid()}
	// The lock is taken before the row exists, so no other process can ever see this run
	// as running without its lock held.
	f, err := d.lockRun(id)
	if err != nil {
		return nil, err
	}
	err = d.tx(ctx, "begin run "+id, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (id, started, status, plan_digest, args, host, pid) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, nanos(now), string(RunRunning), string(plan), string(argsJSON), host, r.PID)
		return err
	})
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	d.mu.Lock()
	d.locks[id] = f
	d.mu.Unlock()
	return r, nil
}

// FinishRun records the end of a run begun by this DB and releases its run lock.
func (d *DB) FinishRun(ctx context.Context, runID string, status RunStatus) error {
	if status != RunSucceeded && status != RunFailed && status != RunInterrupted {
		return fmt.Errorf("state: finish run %s: %q is not a final status", runID, status)
	}
	err := d.tx(ctx, "finish run "+runID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, finished = ? WHERE id = ?`, string(status), nanos(time.Now()), runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	f := d.locks[runID]
	delete(d.locks, runID)
	d.mu.Unlock()
	if f != nil {
		os.Remove(f.Name())
		f.Close()
	}
	return nil
}

const runColumns = `id, started, finished, status, plan_digest, args, host, pid`

func scanRun(s interface{ Scan(...any) error }) (Run, error) {
	var (
		r                 Run
		started, finished sql.NullInt64
		status, plan, arg string
	)
	if err := s.Scan(&r.ID, &started, &finished, &status, &plan, &arg, &r.Host, &r.PID); err != nil {
		return Run{}, err
	}
	r.Started, r.Finished = fromNanos(started), fromNanos(finished)
	r.Status, r.Plan = RunStatus(status), digest.Digest(plan)
	if err := json.Unmarshal([]byte(arg), &r.Args); err != nil {
		return Run{}, fmt.Errorf("run %s: decode args: %w", r.ID, err)
	}
	return r, nil
}

// Runs lists the most recent runs, newest first; limit <= 0 means all.
func (d *DB) Runs(ctx context.Context, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := d.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs ORDER BY started DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("state: list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("state: list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: list runs: %w", err)
	}
	return out, nil
}

// GetRun returns one run.
func (d *DB) GetRun(ctx context.Context, runID string) (Run, error) {
	r, err := scanRun(d.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("state: run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("state: run %s: %w", runID, err)
	}
	return r, nil
}

// RecoverRuns marks every run that is recorded as running but whose process is gone as
// interrupted, its running nodes as failed with the error "interrupted", and the effects it
// had dispatched without a recorded outcome as unknown (see EffectDispatching). It returns
// the runs it marked. Attempts are left alone: they stay listed by InterruptedAttempts until
// their containers are cleaned up and AttemptFinished closes them.
func (d *DB) RecoverRuns(ctx context.Context) ([]Run, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE status = 'running'`)
	if err != nil {
		return nil, fmt.Errorf("state: recover runs: %w", err)
	}
	var dead []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("state: recover runs: %w", err)
		}
		alive, err := d.runAlive(r.ID)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if !alive {
			dead = append(dead, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: recover runs: %w", err)
	}
	now := nanos(time.Now())
	for i := range dead {
		r := &dead[i]
		err := d.tx(ctx, "recover run "+r.ID, func(tx *sql.Tx) error {
			// Guarded by status so that two processes recovering at once do it once.
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'interrupted', finished = ? WHERE id = ? AND status = 'running'`, now, r.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE nodes SET status = 'failed', error = 'interrupted: the run''s process died', finished = ? WHERE run_id = ? AND status = 'running'`, now, r.ID); err != nil {
				return err
			}
			// An effect the dead run had dispatched may or may not have happened: park it.
			return parkEffects(ctx, tx, r.ID, now)
		})
		if err != nil {
			return nil, err
		}
		r.Status, r.Finished = RunInterrupted, fromNanos(now)
		os.Remove(d.lockPath(r.ID))
	}
	return dead, nil
}

func (d *DB) lockPath(runID string) string {
	return filepath.Join(d.lockDir, runID+".lock")
}

// lockRun creates and exclusively locks the run's lock file. flock locks belong to the open
// file description, so they are released when the process dies, however it dies.
func (d *DB) lockRun(runID string) (*os.File, error) {
	f, err := os.OpenFile(d.lockPath(runID), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state: run lock %s: %w", runID, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state: run lock %s: %w", runID, err)
	}
	return f, nil
}

// runAlive reports whether some process (this one included) still holds the run's lock.
func (d *DB) runAlive(runID string) (bool, error) {
	d.mu.Lock()
	_, mine := d.locks[runID]
	d.mu.Unlock()
	if mine {
		return true, nil
	}
	f, err := os.OpenFile(d.lockPath(runID), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // lock file gone: its owner finished or was recovered, or the host rebooted
	}
	if err != nil {
		return false, fmt.Errorf("state: check run %s: %w", runID, err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("state: check run %s: %w", runID, err)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// PruneRuns deletes all but the newest keep runs, with their nodes and attempts. Runs that
// are still recorded as running, and runs with effects (the outbox is kept forever: it is
// what stops an effect from being repeated), are never pruned. It returns how many runs it
// deleted, or with dryRun how many it would delete.
func (d *DB) PruneRuns(ctx context.Context, keep int, dryRun bool) (int, error) {
	if keep < 0 {
		return 0, fmt.Errorf("state: prune runs: keep %d < 0", keep)
	}
	const prunable = `status <> 'running'
	AND id NOT IN (SELECT id FROM runs ORDER BY started DESC, id DESC LIMIT ?)
	AND id NOT IN (SELECT run_id FROM effects)`
	if dryRun {
		var n int
		if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE `+prunable, keep).Scan(&n); err != nil {
			return 0, fmt.Errorf("state: prune runs: %w", err)
		}
		return n, nil
	}
	var n int64
	err := d.tx(ctx, "prune runs", func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE `+prunable, keep)
		if err != nil {
			return err
		}
		n, _ = r.RowsAffected()
		return nil
	})
	return int(n), err
}
