package state

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// The verdict index: recorded once per envelope, listed, withdrawn once with a reason.
func TestVerdictIndex(t *testing.T) {
	ctx := context.Background()
	db, err := OpenState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, cand := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("candidate"))
	env := digest.FromBytes([]byte("envelope"))
	v := Verdict{Envelope: env, Capability: "int-sort", Contract: c, Candidate: cand, SuiteDigest: digest.FromBytes([]byte("suite")),
		Record: []byte(`{}`), Evaluated: time.Now()}
	for i := 0; i < 2; i++ { // recording the same envelope twice changes nothing
		if err := db.RecordVerdict(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := db.Verdicts(ctx)
	if err != nil || len(vs) != 1 || vs[0].Envelope != env || vs[0].Passed || !vs[0].Withdrawn.IsZero() {
		t.Fatalf("verdicts: %+v %v", vs, err)
	}
	if _, err := db.WithdrawVerdict(ctx, string(env)[:20], " "); err == nil {
		t.Fatal("a withdrawal without a reason was recorded")
	}
	if _, err := db.WithdrawVerdict(ctx, digest.FromBytes([]byte("other")).Hex()[:12], "why"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("withdrawing an unknown verdict: %v", err)
	}
	w, err := db.WithdrawVerdict(ctx, env.Hex()[:12], "the sandbox ran out of disk")
	if err != nil || w.WithdrawnReason != "the sandbox ran out of disk" {
		t.Fatalf("withdraw: %+v %v", w, err)
	}
	if _, err := db.WithdrawVerdict(ctx, string(env), "again"); err == nil {
		t.Fatal("a verdict was withdrawn twice")
	}
	if vs, _ := db.Verdicts(ctx); vs[0].Withdrawn.IsZero() || vs[0].WithdrawnReason == "" {
		t.Fatalf("the withdrawal was not kept: %+v", vs[0])
	}
}

func TestEvaluationsAndRetiredCases(t *testing.T) {
	ctx := context.Background()
	db, err := OpenState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, cand := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("candidate"))
	if err := db.RecordEvaluation(ctx, Evaluation{Contract: c, Candidate: cand, Suite: "sealed", Record: []byte(`{}`)}); err == nil {
		t.Fatal("RecordEvaluation accepted a sealed suite")
	}
	if err := db.RecordEvaluation(ctx, Evaluation{Contract: c, Candidate: cand, Suite: "dev", Passed: true, Record: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.RetireCase(ctx, "int-sort", digest.FromBytes([]byte("case")), "sealed/3.json", "shown as a counterexample"); err != nil {
		t.Fatal(err)
	}
	retired, err := db.RetiredCases(ctx, "int-sort")
	if err != nil || len(retired) != 1 {
		t.Fatalf("retired: %v %v", retired, err)
	}
}
