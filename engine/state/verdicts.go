package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// Verdict indexes one sealed evaluation. The evidence is the signed test result named by
// Envelope, in the attestation directory: a verdict row never admits anything or skips an
// evaluation by itself. It keeps what the operator needs beside the evidence (the rejection
// shown, the case names behind the digests the signed result publishes) and a withdrawal.
type Verdict struct {
	Envelope    digest.Digest `json:"envelope"`
	Capability  string        `json:"capability"`
	Contract    digest.Digest `json:"contract_digest"`
	Candidate   digest.Digest `json:"candidate"`
	SuiteDigest digest.Digest `json:"suite_digest"`
	Passed      bool          `json:"passed"`
	Record      []byte        `json:"-"` // engine-defined JSON
	Evaluated   time.Time     `json:"evaluated"`
	// Withdrawn is when the operator withdrew it (zero: standing), with the reason.
	Withdrawn       time.Time `json:"withdrawn,omitzero"`
	WithdrawnReason string    `json:"withdrawn_reason,omitempty"`
}

// RecordVerdict indexes a sealed verdict; recording the same envelope again changes nothing.
func (d *DB) RecordVerdict(ctx context.Context, v Verdict) error {
	return d.tx(ctx, "record verdict", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO verdicts (envelope_digest, capability, contract_digest, candidate_digest, suite_digest, passed, record, evaluated)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (envelope_digest) DO NOTHING`,
			string(v.Envelope), v.Capability, string(v.Contract), string(v.Candidate), string(v.SuiteDigest), v.Passed, v.Record, nanos(v.Evaluated))
		return err
	})
}

// Verdicts returns every indexed verdict, newest first.
func (d *DB) Verdicts(ctx context.Context) ([]Verdict, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT envelope_digest, capability, contract_digest, candidate_digest, suite_digest,
passed, record, evaluated, withdrawn, withdrawn_reason FROM verdicts ORDER BY evaluated DESC, envelope_digest`)
	if err != nil {
		return nil, fmt.Errorf("state: verdicts: %w", err)
	}
	defer rows.Close()
	var out []Verdict
	for rows.Next() {
		var v Verdict
		var env, contract, cand, suite string
		var evaluated int64
		var withdrawn sql.NullInt64
		if err := rows.Scan(&env, &v.Capability, &contract, &cand, &suite, &v.Passed, &v.Record, &evaluated, &withdrawn, &v.WithdrawnReason); err != nil {
			return nil, fmt.Errorf("state: verdicts: %w", err)
		}
		v.Envelope, v.Contract, v.Candidate, v.SuiteDigest = digest.Digest(env), digest.Digest(contract), digest.Digest(cand), digest.Digest(suite)
		v.Evaluated = fromNanos(sql.NullInt64{Int64: evaluated, Valid: true})
		if withdrawn.Valid {
			v.Withdrawn = fromNanos(withdrawn)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ErrAmbiguous is returned when a digest prefix names more than one verdict.
var ErrAmbiguous = errors.New("ambiguous")

// WithdrawVerdict records the operator's withdrawal of the verdict whose envelope digest is,
// or starts with, id: it is not reused again, so the next apply evaluates the candidate
// afresh. The signed evidence is kept; a case it disclosed stays disclosed.
func (d *DB) WithdrawVerdict(ctx context.Context, id, reason string) (Verdict, error) {
	if strings.TrimSpace(reason) == "" {
		return Verdict{}, errors.New("state: a withdrawal needs a reason")
	}
	if !strings.HasPrefix(id, digest.Algorithm+":") {
		id = digest.Algorithm + ":" + id
	}
	vs, err := d.Verdicts(ctx)
	if err != nil {
		return Verdict{}, err
	}
	var match []Verdict
	for _, v := range vs {
		if strings.HasPrefix(string(v.Envelope), id) {
			match = append(match, v)
		}
	}
	switch {
	case len(match) == 0:
		return Verdict{}, fmt.Errorf("state: no verdict %s: %w", id, ErrNotFound)
	case len(match) > 1:
		return Verdict{}, fmt.Errorf("state: %s names %d verdicts: %w (give more of the digest)", id, len(match), ErrAmbiguous)
	case !match[0].Withdrawn.IsZero():
		return Verdict{}, fmt.Errorf("state: verdict %s was already withdrawn (%s)", match[0].Envelope, match[0].WithdrawnReason)
	}
	now := time.Now()
	err = d.tx(ctx, "withdraw verdict", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE verdicts SET withdrawn = ?, withdrawn_reason = ? WHERE envelope_digest = ?`,
			nanos(now), reason, string(match[0].Envelope))
		return err
	})
	match[0].Withdrawn, match[0].WithdrawnReason = now, reason
	return match[0], err
}
