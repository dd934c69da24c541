package state

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// A job is opened once per contract, target and policy and joined after; a round is
// reserved when dispatched, charged part by part, resumed (not repeated) after a crash and
// finished once.
func TestJobLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	c, pol := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("policy"))
	id, err := JobID(c, "linux/amd64", pol)
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := JobID(c, "linux/arm64", pol); other == id {
		t.Fatal("two targets share a job")
	}
	b := JobBudget{Candidates: 3, Probes: 20, Wall: time.Minute, Scratch: 1 << 20}
	j, created, err := db.OpenJob(ctx, Job{ID: id, Capability: "sorter", Contract: c, Target: "linux/amd64", Policy: pol, Budget: b, Waiting: []string{"step.b"}})
	if err != nil || !created || j.Status != JobOpen || j.Budget != b {
		t.Fatalf("open: %+v %v %v", j, created, err)
	}
	b.Candidates = 5 // a later apply raises the budget, and another node waits
	j, created, err = db.OpenJob(ctx, Job{ID: id, Capability: "sorter", Contract: c, Target: "linux/amd64", Policy: pol, Budget: b, Waiting: []string{"step.a", "step.b"}})
	if err != nil || created || j.Budget.Candidates != 5 || !slices.Equal(j.Waiting, []string{"step.a", "step.b"}) {
		t.Fatalf("join: %+v %v %v", j, created, err)
	}

	if err := db.StartRound(ctx, id, 1, "builder", "run-1"); err != nil {
		t.Fatal(err)
	}
	if err := db.ChargeRound(ctx, id, 1, Usage{Wall: time.Second, PeakMemory: 10, Probes: 2, Spend: 0.5}); err != nil {
		t.Fatal(err)
	}
	// The apply dies; the next resumes round 1: what was charged stays.
	if err := db.StartRound(ctx, id, 1, "builder", "run-2"); err != nil {
		t.Fatal(err)
	}
	if err := db.ChargeRound(ctx, id, 1, Usage{Wall: time.Second, PeakMemory: 4, Probes: 1}); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRound(ctx, id, 1, RoundRejected, "sha256:b", "sha256:c", []byte(`{"round":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRound(ctx, id, 1, RoundAdmitted, "", "", nil); err == nil {
		t.Error("a round was finished twice")
	}
	if err := db.StartRound(ctx, id, 1, "builder", "run-3"); err == nil {
		t.Error("a round that ended was dispatched again")
	}
	rs, err := db.Rounds(ctx, id)
	if err != nil || len(rs) != 1 {
		t.Fatalf("rounds: %+v %v", rs, err)
	}
	r := rs[0]
	if r.Status != RoundRejected || r.RunID != "run-2" || r.Attempts != 2 || string(r.Failure) != `{"round":1}` {
		t.Errorf("a finished round was dispatched again, or its record is wrong: %+v", r)
	}
	if want := (Usage{Wall: 2 * time.Second, PeakMemory: 10, Probes: 3, Spend: 0.5}); r.Used != want {
		t.Errorf("usage %+v, want %+v", r.Used, want)
	}
	if s, err := db.JobsSpend(ctx); err != nil || s != 0.5 {
		t.Errorf("spend of all jobs %v %v", s, err)
	}

	if err := db.SetJobStatus(ctx, id, JobExhausted, "the report", ""); err != nil {
		t.Fatal(err)
	}
	js, err := db.Jobs(ctx)
	if err != nil || len(js) != 1 || js[0].Status != JobExhausted || js[0].Outcome != "the report" {
		t.Fatalf("jobs: %+v %v", js, err)
	}
	if err := db.SetJobStatus(ctx, "job-none", JobOpen, "", ""); err == nil {
		t.Error("the status of an unknown job was set")
	}
}
