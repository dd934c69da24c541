package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CapabilityEvent is one thing that happened to a capability in a run, as the engine
// reported it: a suite evaluated on a candidate recipe, a candidate rejected, the
// capability admitted (published) or pinned to an admitted version, an unknown publish
// reconciled, or the capability failed. The signed evidence is elsewhere (attestations,
// evaluations); these rows only say, per run, what was decided.
type CapabilityEvent struct {
	RunID       string    `json:"run"`
	Seq         int       `json:"seq"` // order within the run, from 1
	Time        time.Time `json:"time"`
	Type        string    `json:"type"`             // suite_evaluated, candidate_rejected, capability_admitted, capability_pinned, effect_reconciled, capability_failed; product_accepted, acceptance_failed, product_delivered
	Capability  string    `json:"capability"`       // the capability's address, or the product's
	Recipe      string    `json:"recipe,omitempty"` // the candidate
	Suite       string    `json:"suite,omitempty"`  // suite_evaluated; candidate_rejected when a suite rejected it
	Passed      *bool     `json:"passed,omitempty"` // suite_evaluated: every case passed
	Cases       *int      `json:"cases,omitempty"`  // suite_evaluated: cases run
	CasesPassed *int      `json:"cases_passed,omitempty"`
	Ref         string    `json:"ref,omitempty"` // capability_admitted, capability_pinned: the admitted version; product_accepted, acceptance_failed: the signed result; product_delivered: where the release is
	Message     string    `json:"message"`       // as the progress event said it
}

// RecordCapabilityEvent appends e to its run's capability events, numbering it after the
// run's last one.
func (d *DB) RecordCapabilityEvent(ctx context.Context, e CapabilityEvent) error {
	if e.RunID == "" || e.Type == "" || e.Capability == "" {
		return fmt.Errorf("state: capability event: run, type and capability are required")
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	var passed sql.NullBool
	if e.Passed != nil {
		passed = sql.NullBool{Bool: *e.Passed, Valid: true}
	}
	return d.tx(ctx, "record a capability event of run "+e.RunID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO capability_events (run_id, seq, at, type, capability, recipe, suite, passed, cases, cases_passed, ref, message)
VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM capability_events WHERE run_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.RunID, e.RunID, nanos(e.Time), e.Type, e.Capability, e.Recipe, e.Suite, passed, nullInt(e.Cases), nullInt(e.CasesPassed), e.Ref, e.Message)
		return err
	})
}

// CapabilityEvents returns the capability events of a run in order (none for a run
// without capabilities, or one from before schema version 6).
func (d *DB) CapabilityEvents(ctx context.Context, runID string) ([]CapabilityEvent, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT seq, at, type, capability, recipe, suite, passed, cases, cases_passed, ref, message
FROM capability_events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("state: capability events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []CapabilityEvent
	for rows.Next() {
		e := CapabilityEvent{RunID: runID}
		var (
			at                 sql.NullInt64
			passed             sql.NullBool
			cases, casesPassed sql.NullInt64
		)
		if err := rows.Scan(&e.Seq, &at, &e.Type, &e.Capability, &e.Recipe, &e.Suite, &passed, &cases, &casesPassed, &e.Ref, &e.Message); err != nil {
			return nil, fmt.Errorf("state: capability events of run %s: %w", runID, err)
		}
		e.Time = fromNanos(at)
		if passed.Valid {
			e.Passed = &passed.Bool
		}
		if cases.Valid {
			n := int(cases.Int64)
			e.Cases = &n
		}
		if casesPassed.Valid {
			n := int(casesPassed.Int64)
			e.CasesPassed = &n
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: capability events of run %s: %w", runID, err)
	}
	return out, nil
}

func nullInt(p *int) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*p), Valid: true}
}
