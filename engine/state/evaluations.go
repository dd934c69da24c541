package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/foundry-build/foundry/engine/digest"
)

// Evaluation is the recorded outcome of one suite run on one candidate.
type Evaluation struct {
	Contract  digest.Digest
	Candidate digest.Digest
	Suite     string // dev, repair or sealed
	Passed    bool
	Record    []byte // the evaluator's JSON record of the cases (engine-defined)
	Evaluated time.Time
}

// ErrAlreadyEvaluated is returned (wrapped) by RecordSealedEvaluation when the candidate
// already met the sealed suite: it meets it exactly once.
var ErrAlreadyEvaluated = errors.New("the candidate was already evaluated on the sealed suite")

// RecordEvaluation stores the outcome of a dev or repair suite run, replacing an earlier one
// (visible suites may be re-run freely). Sealed outcomes go through RecordSealedEvaluation.
func (d *DB) RecordEvaluation(ctx context.Context, e Evaluation) error {
	if e.Suite == "sealed" {
		return errors.New("state: sealed evaluations are recorded with RecordSealedEvaluation")
	}
	return d.tx(ctx, "record evaluation", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO evaluations (contract_digest, candidate_digest, suite, passed, record, evaluated) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (contract_digest, candidate_digest, suite) DO UPDATE SET passed = excluded.passed, record = excluded.record, evaluated = excluded.evaluated`,
			string(e.Contract), string(e.Candidate), e.Suite, e.Passed, e.Record, nanos(time.Now()))
		return err
	})
}

// RecordSealedEvaluation stores the one sealed evaluation of a candidate. A second one for
// the same contract and candidate is refused with ErrAlreadyEvaluated, whatever its outcome:
// the evaluator must reuse the first instead of running the sealed cases again.
func (d *DB) RecordSealedEvaluation(ctx context.Context, e Evaluation) error {
	return d.tx(ctx, "record sealed evaluation", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO evaluations (contract_digest, candidate_digest, suite, passed, record, evaluated) VALUES (?, ?, 'sealed', ?, ?, ?)`,
			string(e.Contract), string(e.Candidate), e.Passed, e.Record, nanos(time.Now()))
		if err != nil && isConstraint(err) {
			return fmt.Errorf("state: %s for contract %s: %w", e.Candidate, e.Contract, ErrAlreadyEvaluated)
		}
		return err
	})
}

// GetEvaluation returns the recorded outcome of a suite run on a candidate.
func (d *DB) GetEvaluation(ctx context.Context, contract, candidate digest.Digest, suite string) (Evaluation, bool, error) {
	e := Evaluation{Contract: contract, Candidate: candidate, Suite: suite}
	var evaluated sql.NullInt64
	err := d.db.QueryRowContext(ctx, `SELECT passed, record, evaluated FROM evaluations WHERE contract_digest = ? AND candidate_digest = ? AND suite = ?`,
		string(contract), string(candidate), suite).Scan(&e.Passed, &e.Record, &evaluated)
	if errors.Is(err, sql.ErrNoRows) {
		return Evaluation{}, false, nil
	}
	if err != nil {
		return Evaluation{}, false, fmt.Errorf("state: evaluation of %s: %w", candidate, err)
	}
	e.Evaluated = fromNanos(evaluated)
	return e, true, nil
}

// RetireCase records that a sealed case was shown to a builder (as a counterexample): it
// leaves the sealed set for good.
func (d *DB) RetireCase(ctx context.Context, capability string, caseDigest digest.Digest, name, reason string) error {
	return d.tx(ctx, "retire case", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO retired_cases (capability, case_digest, case_name, reason, retired) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (capability, case_digest) DO NOTHING`, capability, string(caseDigest), name, reason, nanos(time.Now()))
		return err
	})
}

// RetiredCases returns the digests of a capability's retired sealed cases.
func (d *DB) RetiredCases(ctx context.Context, capability string) (map[digest.Digest]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT case_digest, case_name FROM retired_cases WHERE capability = ?`, capability)
	if err != nil {
		return nil, fmt.Errorf("state: retired cases of %s: %w", capability, err)
	}
	defer rows.Close()
	out := map[digest.Digest]string{}
	for rows.Next() {
		var d, name string
		if err := rows.Scan(&d, &name); err != nil {
			return nil, err
		}
		out[digest.Digest(d)] = name
	}
	return out, rows.Err()
}

// isConstraint reports whether err is a SQLite constraint violation (a duplicate key).
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
