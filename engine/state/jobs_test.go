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
	id, err := JobID("p", c, "linux/amd64", pol)
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := JobID("p", c, "linux/arm64", pol); other == id {
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
	t0 := time.Now().Add(-time.Hour)
	if res, err := db.Reserve(ctx, id, 1, Reservation{Part: PartProposal, Wall: time.Minute, At: t0}); err != nil || !res.At.Equal(t0) {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if err := db.Charge(ctx, id, 1, PartProposal, Usage{Wall: time.Second, PeakMemory: 10, Spend: 0.5}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Reserve(ctx, id, 1, Reservation{Part: PartEvaluation, Wall: time.Minute, Probes: 2, At: t0}); err != nil {
		t.Fatal(err)
	}
	// The apply dies in the evaluation; the next resumes round 1: what was charged stays,
	// the proposal is marked charged, and the evaluation's reservation is the one in force.
	if err := db.StartRound(ctx, id, 1, "builder", "run-2"); err != nil {
		t.Fatal(err)
	}
	rs, err := db.Rounds(ctx, id)
	if err != nil || len(rs) != 1 || !rs[0].ProposalCharged || rs[0].Reserved == nil || rs[0].Reserved.Part != PartEvaluation || rs[0].Reserved.Probes != 2 {
		t.Fatalf("the resumed round: %+v %v", rs, err)
	}
	if res, err := db.Reserve(ctx, id, 1, Reservation{Part: PartEvaluation, Wall: time.Minute, Probes: 2, At: time.Now()}); err != nil || !res.At.Equal(t0) {
		t.Errorf("reserving again: %+v %v; want the reservation in force, made at %v", res, err, t0)
	}
	if _, err := db.Reserve(ctx, id, 1, Reservation{Part: PartProposal, Wall: time.Minute, At: time.Now()}); err == nil {
		t.Error("a part was reserved while another's reservation is open")
	}
	// An open reservation counts as spent (up to what it reserved) when the part is charged
	// with it, as the caller does, or when the round ends with it open.
	spent := rs[0].Reserved.Spent(time.Now())
	if spent.Wall != time.Minute || spent.CasesWall != time.Minute || spent.Probes != 2 || spent.BuilderWall != 0 {
		t.Errorf("spent %+v", spent)
	}
	if err := db.Charge(ctx, id, 1, PartEvaluation, Usage{Wall: time.Second, PeakMemory: 4, Probes: 1}.Add(spent), nil); err != nil {
		t.Fatal(err)
	}
	if rs, _ := db.Rounds(ctx, id); len(rs) != 1 || rs[0].Reserved != nil {
		t.Errorf("the charge left the reservation open: %+v", rs)
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
	rs, err = db.Rounds(ctx, id)
	if err != nil || len(rs) != 1 {
		t.Fatalf("rounds: %+v %v", rs, err)
	}
	r := rs[0]
	if r.Status != RoundRejected || r.RunID != "run-2" || r.Attempts != 2 || string(r.Failure) != `{"round":1}` {
		t.Errorf("a finished round was dispatched again, or its record is wrong: %+v", r)
	}
	if want := (Usage{Wall: 2*time.Second + time.Minute, CasesWall: time.Minute, PeakMemory: 10, Probes: 3, Spend: 0.5}); r.Used != want {
		t.Errorf("usage %+v, want %+v", r.Used, want)
	}
	// A round that ends with a reservation open (found admitted elsewhere) spends it.
	if err := db.StartRound(ctx, id, 2, "builder", "run-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Reserve(ctx, id, 2, Reservation{Part: PartProposal, Wall: time.Minute, At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishRound(ctx, id, 2, RoundAdmitted, "", "sha256:c", nil); err != nil {
		t.Fatal(err)
	}
	if rs, err := db.Rounds(ctx, id); err != nil || len(rs) != 2 || rs[1].Reserved != nil || rs[1].Used != (Usage{Wall: time.Minute, BuilderWall: time.Minute}) {
		t.Errorf("round 2 ended with its reservation open: %+v %v", rs, err)
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

// A job recorded under an earlier ID (v1, without the project's name) is given the new ID
// with its rounds and proposals, so that what it spent stays spent.
func TestAdoptJob(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	c, pol := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("policy"))
	b := JobBudget{Candidates: 3, Probes: 20, Wall: time.Minute, Scratch: 1 << 20}
	if _, _, err := db.OpenJob(ctx, Job{ID: "job-old", Capability: "sorter", Contract: c, Target: "linux/amd64", Policy: pol, Budget: b}); err != nil {
		t.Fatal(err)
	}
	if err := db.StartRound(ctx, "job-old", 1, "builder", "run-1"); err != nil {
		t.Fatal(err)
	}
	id, _ := JobID("p", c, "linux/amd64", pol)
	for range 2 { // a second adoption finds the job under its new ID and does nothing
		if err := db.AdoptJob(ctx, id, c, "linux/amd64", pol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Job(ctx, "job-old"); err == nil {
		t.Error("the job is still recorded under its old ID")
	}
	if j, err := db.Job(ctx, id); err != nil || j.Capability != "sorter" {
		t.Fatalf("the adopted job: %+v %v", j, err)
	}
	if rs, err := db.Rounds(ctx, id); err != nil || len(rs) != 1 {
		t.Fatalf("the adopted job's rounds: %+v %v", rs, err)
	}
}

// The oracle part is reserved like the others, and its charge records what was asked with
// it, in one transaction: the round then holds both, and the reservation is released.
func TestChargeOracle(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	c, pol := digest.FromBytes([]byte("contract")), digest.FromBytes([]byte("policy"))
	id, err := JobID("p", c, "linux/amd64", pol)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.OpenJob(ctx, Job{ID: id, Capability: "sorter", Contract: c, Target: "linux/amd64", Policy: pol, Budget: JobBudget{Candidates: 1, Probes: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := db.StartRound(ctx, id, 1, "builder", "run-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Reserve(ctx, id, 1, Reservation{Part: PartOracle, Wall: time.Minute, Probes: 2, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	o := Oracle{Asked: 3, Answered: 2, Refused: 1, Answers: digest.FromBytes([]byte("answers"))}
	if err := db.ChargeOracle(ctx, id, 1, Usage{Wall: time.Second, Probes: 2}, o); err != nil {
		t.Fatal(err)
	}
	rs, err := db.Rounds(ctx, id)
	if err != nil || len(rs) != 1 {
		t.Fatalf("rounds: %+v %v", rs, err)
	}
	if r := rs[0]; r.Oracle == nil || *r.Oracle != o || r.Reserved != nil || r.Used.Probes != 2 || r.ProposalCharged {
		t.Errorf("round after the oracle's charge: %+v (oracle %+v); want %+v recorded, 2 probes, no reservation", r, r.Oracle, o)
	}
}
