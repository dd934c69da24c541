package state

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/engine/digest"
)

func TestSealedEvaluationOnlyOnce(t *testing.T) {
	ctx := context.Background()
	db, err := OpenState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, cand := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("candidate"))
	if err := db.RecordSealedEvaluation(ctx, Evaluation{Contract: c, Candidate: cand, Passed: false, Record: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// A second sealed run of the same candidate is refused, even one claiming a pass.
	err = db.RecordSealedEvaluation(ctx, Evaluation{Contract: c, Candidate: cand, Passed: true, Record: []byte(`{}`)})
	if !errors.Is(err, ErrAlreadyEvaluated) {
		t.Fatalf("second sealed evaluation: %v, want ErrAlreadyEvaluated", err)
	}
	e, ok, err := db.GetEvaluation(ctx, c, cand, "sealed")
	if err != nil || !ok || e.Passed {
		t.Fatalf("the first (failed) sealed evaluation must stand: %+v %v %v", e, ok, err)
	}
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
