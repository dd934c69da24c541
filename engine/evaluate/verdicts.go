package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
)

// VerdictView is one sealed verdict as the evidence says it (the index row's fields, filled
// from the signed test result), with what the index adds for the operator: when it was
// recorded, the case file behind the digest the signed result names, and a withdrawal.
type VerdictView struct {
	state.Verdict
	Cases  int `json:"cases"`
	Failed int `json:"failed"`
	// Disclosed is the case the evaluation showed as its counterexample: its file, from the
	// local record, or its digest.
	Disclosed string `json:"disclosed,omitempty"`
	// Evidence is where the signed test result is; empty for a row with no signed result
	// behind it, which no decision uses.
	Evidence string `json:"evidence,omitempty"`
}

// Verdicts lists the sealed verdicts of the project of workspace w: every signed sealed test result in the
// attestation directory that verifies with keys, joined with its index row, and then the
// rows that have no evidence (shown so that the operator sees them ignored).
func Verdicts(ctx context.Context, w *workspace.Workspace, keys []*provenance.Verifier) ([]VerdictView, error) {
	results, err := provenance.TestResultsIn(w.AttestationDir(), keys, nil)
	if err != nil {
		return nil, err
	}
	rows, err := w.State.Verdicts(ctx)
	if err != nil {
		return nil, err
	}
	byEnv := map[digest.Digest]state.Verdict{}
	for _, r := range rows {
		byEnv[r.Envelope] = r
	}
	var out []VerdictView
	seen := map[digest.Digest]bool{}
	for _, t := range results {
		if t.Suite != provenance.SuiteSealed {
			continue
		}
		env := digest.Digest(t.Digest)
		seen[env] = true
		v := VerdictView{Verdict: state.Verdict{Envelope: env, Capability: t.Capability, Contract: digest.Digest(t.ContractDigest),
			SuiteDigest: digest.Digest(t.SuiteDigest), Passed: t.Passed()}, Evidence: t.Path,
			Failed: len(t.Predicate.GetFailedTests()), Cases: len(t.Predicate.GetFailedTests()) + len(t.Predicate.GetPassedTests())}
		if len(t.Subjects) > 0 {
			v.Candidate = digest.Digest(t.Subjects[0])
		}
		if len(t.Disclosed) > 0 {
			v.Disclosed = t.Disclosed[0]
		}
		if r, ok := byEnv[env]; ok {
			v.Evaluated, v.Withdrawn, v.WithdrawnReason = r.Evaluated, r.Withdrawn, r.WithdrawnReason
			var rec verdictRecord
			if json.Unmarshal(r.Record, &rec) == nil && rec.Cases[digest.Digest(v.Disclosed)] != "" {
				v.Disclosed = rec.Cases[digest.Digest(v.Disclosed)]
			}
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Evaluated.After(out[j].Evaluated) })
	for _, r := range rows {
		if !seen[r.Envelope] {
			out = append(out, VerdictView{Verdict: r})
		}
	}
	return out, nil
}

// WithdrawVerdict withdraws the sealed verdict whose envelope digest is, or starts with, id,
// recording reason: the next apply evaluates that candidate on the sealed suite afresh
// instead of reusing it. Only a verdict with signed evidence can be withdrawn; the evidence
// is kept, and a case it disclosed stays disclosed.
func WithdrawVerdict(ctx context.Context, w *workspace.Workspace, keys []*provenance.Verifier, id, reason string) (VerdictView, error) {
	vs, err := Verdicts(ctx, w, keys)
	if err != nil {
		return VerdictView{}, err
	}
	want := id
	if !strings.HasPrefix(want, digest.Algorithm+":") {
		want = digest.Algorithm + ":" + want
	}
	var match []VerdictView
	for _, v := range vs {
		if v.Evidence != "" && strings.HasPrefix(string(v.Envelope), want) {
			match = append(match, v)
		}
	}
	switch len(match) {
	case 0:
		return VerdictView{}, fmt.Errorf("no sealed verdict with signed evidence matches %s (see 'foundry verdicts')", id)
	case 1:
	default:
		return VerdictView{}, fmt.Errorf("%s matches %d verdicts; give more of the digest", id, len(match))
	}
	v := match[0]
	// A verdict whose index row was lost is indexed again from its evidence first.
	row := v.Verdict
	row.Record, row.Evaluated = []byte(`{}`), time.Now()
	if err := w.State.RecordVerdict(ctx, row); err != nil {
		return VerdictView{}, err
	}
	withdrawn, err := w.State.WithdrawVerdict(ctx, string(v.Envelope), reason)
	if err != nil {
		return VerdictView{}, err
	}
	v.Withdrawn, v.WithdrawnReason = withdrawn.Withdrawn, withdrawn.WithdrawnReason
	return v, nil
}
