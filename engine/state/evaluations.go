package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
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

// RecordEvaluation stores the outcome of a dev or repair suite run, replacing an earlier one
// (visible suites may be re-run freely). Sealed verdicts are indexed by RecordVerdict; their
// evidence is the signed test result.
func (d *DB) RecordEvaluation(ctx context.Context, e Evaluation) error {
	if e.Suite == "sealed" {
		return errors.New("state: sealed verdicts are indexed with RecordVerdict")
	}
	return d.tx(ctx, "record evaluation", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO evaluations (contract_digest, candidate_digest, suite, passed, record, evaluated) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (contract_digest, candidate_digest, suite) DO UPDATE SET passed = excluded.passed, record = excluded.record, evaluated = excluded.evaluated`,
			string(e.Contract), string(e.Candidate), e.Suite, e.Passed, e.Record, nanos(time.Now()))
		return err
	})
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
