package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// JobStatus is where a reconstruction job stands (spec/capability.md §5a).
type JobStatus string

const (
	JobOpen       JobStatus = "open"       // rounds may still run
	JobAdmitted   JobStatus = "admitted"   // a candidate passed the sealed suite and was admitted
	JobExhausted  JobStatus = "exhausted"  // its budget is spent, none admitted
	JobUnresolved JobStatus = "unresolved" // it cannot go on: the sealed set is used up, or the builder cannot run
)

// JobBudget is what a job may spend over all its rounds, as its reconstruct block said when
// an apply last opened it.
type JobBudget struct {
	Candidates int           `json:"candidates"`
	Probes     int           `json:"probes"`
	Wall       time.Duration `json:"wall_ns"`
	Scratch    int64         `json:"scratch_bytes"`
	Spend      float64       `json:"spend"`
}

// Usage is what a round used, charged as each of its parts ends.
type Usage struct {
	CPU           time.Duration `json:"cpu_ns"`
	Wall          time.Duration `json:"wall_ns"`
	PeakMemory    int64         `json:"peak_memory_bytes"`
	Written       int64         `json:"written_bytes"` // what the proposal wrote
	Probes        int           `json:"probes"`        // dev and repair case runs
	Interventions int           `json:"interventions"` // proposals a person made or edited
	Spend         float64       `json:"spend"`
	// BuilderWall, BuildWall and CasesWall are the parts of Wall the proposal source, the
	// build run over the proposal (a reconstruct block's build) and the case runs took; the
	// rest is the job's own overhead.
	BuilderWall time.Duration `json:"builder_wall_ns"`
	BuildWall   time.Duration `json:"build_wall_ns,omitempty"`
	CasesWall   time.Duration `json:"cases_wall_ns"`
}

// Add adds u's counts to t's; peak memory is the larger.
func (t Usage) Add(u Usage) Usage {
	t.CPU += u.CPU
	t.Wall += u.Wall
	t.PeakMemory = max(t.PeakMemory, u.PeakMemory)
	t.Written += u.Written
	t.Probes += u.Probes
	t.Interventions += u.Interventions
	t.Spend += u.Spend
	t.BuilderWall += u.BuilderWall
	t.BuildWall += u.BuildWall
	t.CasesWall += u.CasesWall
	return t
}

// Job is one reconstruction job: one per contract digest, target platform and trust policy,
// opened by the first apply that needs it and joined by every later one.
type Job struct {
	ID         string
	Capability string
	Contract   digest.Digest
	Target     string
	Policy     digest.Digest
	Status     JobStatus
	Budget     JobBudget
	// Outcome is the report of an admitted, exhausted or unresolved job; Admitted the
	// registry reference of what it admitted.
	Outcome  string
	Admitted string
	// Waiting are the addresses of the nodes that wait for its capability.
	Waiting []string
	// Dossier is the digest of the reference dossier its rounds ran under (the latest
	// apply's, spec/capability.md §5b); "" when its reconstruct block names no reference.
	Dossier digest.Digest
	Opened  time.Time
	Updated time.Time
}

// RoundStatus is where one round stands.
type RoundStatus string

const (
	RoundRunning  RoundStatus = "running"  // dispatched, not yet ended (or its apply died)
	RoundFailed   RoundStatus = "failed"   // no candidate: the builder failed or wrote too much
	RoundRejected RoundStatus = "rejected" // its candidate failed a suite or was refused
	RoundAdmitted RoundStatus = "admitted"
)

// Round is one round of a job: a proposal, the candidate made of it, and what happened.
type Round struct {
	Job    string
	N      int
	Source string // what proposed: the builder's address, or another source's name
	RunID  string // the apply that last worked on it
	Status RoundStatus
	// Builder is the cache key of the builder's run; Candidate the candidate's tree digest.
	Builder   digest.Digest
	Candidate digest.Digest
	// Failure is the round's failure as the next round's builder reads it (JSON), empty
	// unless failed or rejected.
	Failure []byte
	// Brief is the digest of the tree its proposer read (what /job held).
	Brief digest.Digest
	Used  Usage
	// Reserved is the reservation of the part an apply dispatched and did not charge (it
	// died in it), nil when none is open; ProposalCharged is set once the proposal part
	// was charged, so that a resumed round does not charge it again.
	Reserved        *Reservation
	ProposalCharged bool
	// Logs are the logs of the round's runs, in the order they ran: its builder's and, for
	// a reconstruct block with a build, its build's; none for a proposal sent from outside.
	Logs []RunLog
	// Oracle is what its builder asked the references as an oracle, once answered and
	// charged; nil when it asked nothing (or not yet).
	Oracle   *Oracle
	Attempts int // applies that dispatched it: more than 1 after a crash
	Started  time.Time
	Finished time.Time
}

// RunLog is where the logs of one run of a round are (blobs in the content store), and how
// the run ended when it failed.
type RunLog struct {
	Run    string        `json:"run"` // "builder" or "build"
	Stdout digest.Digest `json:"stdout,omitempty"`
	Stderr digest.Digest `json:"stderr,omitempty"`
	Error  string        `json:"error,omitempty"` // why it failed; "" when it succeeded
}

// Oracle is what one round's builder asked the references as an oracle: how many requests
// it wrote, how many were answered (each a probe) and refused (not run: over the probe
// budget, for a reference that does not allow observe, or not a request), and the
// answers, one JSON line per request, in the content store (what the next round reads).
type Oracle struct {
	Asked    int           `json:"asked"`
	Answered int           `json:"answered"`
	Refused  int           `json:"refused"`
	Answers  digest.Digest `json:"answers"`
}

// JobID is the ID of project's job for a contract, target and trust policy: the same in
// every apply and in the plan, and different in two projects that reconstruct the same
// contract (v2; v1 left the project out, so unrelated projects shared job IDs).
func JobID(project string, contract digest.Digest, target string, policy digest.Digest) (string, error) {
	d, _, err := digest.Of([]string{"foundry-job/v2", project, string(contract), target, string(policy)})
	if err != nil {
		return "", fmt.Errorf("state: job id: %w", err)
	}
	return "job-" + d.Hex()[:16], nil
}

// AdoptJob gives the job recorded for a contract, target and policy the ID id, with its
// rounds and proposals, when an earlier foundry recorded it under another ID (a v1 job
// ID). There is at most one such job in a project's state (jobs are unique by the three),
// so what it spent stays spent under its new ID. It does nothing when none is recorded.
func (d *DB) AdoptJob(ctx context.Context, id string, contract digest.Digest, target string, policy digest.Digest) error {
	return d.tx(ctx, "adopt job "+id, func(tx *sql.Tx) error {
		var old string
		err := tx.QueryRowContext(ctx, `SELECT id FROM jobs WHERE contract_digest = ? AND target = ? AND policy_digest = ?`,
			string(contract), target, string(policy)).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) || old == id {
			return nil
		}
		if err != nil {
			return err
		}
		// The job's rows point at it by ID: checked at commit, when all of them moved.
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		for _, q := range []string{
			`UPDATE jobs SET id = ? WHERE id = ?`,
			`UPDATE job_rounds SET job_id = ? WHERE job_id = ?`,
			`UPDATE proposals SET job_id = ? WHERE job_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id, old); err != nil {
				return fmt.Errorf("from %s: %w", old, err)
			}
		}
		return nil
	})
}

// OpenJob opens j, or joins the job already recorded under its ID: that one keeps its
// status, rounds and spend, and takes j's budget, waiting nodes and dossier. It returns the job as
// recorded and whether this call created it.
func (d *DB) OpenJob(ctx context.Context, j Job) (Job, bool, error) {
	if j.ID == "" || j.Capability == "" {
		return Job{}, false, errors.New("state: open job: ID and capability are required")
	}
	budget, err := json.Marshal(j.Budget)
	if err != nil {
		return Job{}, false, err
	}
	var created bool
	now := nanos(time.Now())
	err = d.tx(ctx, "open job "+j.ID, func(tx *sql.Tx) error {
		old, err := scanJob(tx.QueryRowContext(ctx, jobSelect+` WHERE id = ?`, j.ID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
			waiting, err := json.Marshal(sortedUnion(nil, j.Waiting))
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO jobs (id, capability, contract_digest, target, policy_digest, status, budget, waiting, dossier, opened, updated)
VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?)`, j.ID, j.Capability, string(j.Contract), j.Target, string(j.Policy), string(budget), string(waiting), string(j.Dossier), now, now)
			return err
		case err != nil:
			return err
		}
		waiting, err := json.Marshal(sortedUnion(old.Waiting, j.Waiting))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET budget = ?, waiting = ?, dossier = ?, updated = ? WHERE id = ?`, string(budget), string(waiting), string(j.Dossier), now, j.ID)
		return err
	})
	if err != nil {
		return Job{}, false, err
	}
	got, err := d.Job(ctx, j.ID)
	return got, created, err
}

// SetJobStatus records a job's status and the report of its outcome (admitted: the
// reference it was admitted as). Reopening a job (JobOpen) keeps its rounds and spend.
func (d *DB) SetJobStatus(ctx context.Context, id string, status JobStatus, outcome, admitted string) error {
	return d.tx(ctx, "set status of job "+id, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE jobs SET status = ?, outcome = ?, admitted = ?, updated = ? WHERE id = ?`,
			string(status), outcome, admitted, nanos(time.Now()), id)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("no job %s", id)
		}
		return nil
	})
}

// Job returns the job with the given ID, or an error wrapping sql.ErrNoRows.
func (d *DB) Job(ctx context.Context, id string) (Job, error) {
	j, err := scanJob(d.db.QueryRowContext(ctx, jobSelect+` WHERE id = ?`, id))
	if err != nil {
		return Job{}, fmt.Errorf("state: job %s: %w", id, err)
	}
	return j, nil
}

// Jobs returns every job, the most recently updated first.
func (d *DB) Jobs(ctx context.Context) ([]Job, error) {
	rows, err := d.db.QueryContext(ctx, jobSelect+` ORDER BY updated DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("state: list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("state: list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

const jobSelect = `SELECT id, capability, contract_digest, target, policy_digest, status, budget, outcome, admitted, waiting, dossier, opened, updated FROM jobs`

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var (
		j                        Job
		contract, policy, status string
		dossier                  string
		budget, waiting          string
		opened, updated          sql.NullInt64
	)
	if err := row.Scan(&j.ID, &j.Capability, &contract, &j.Target, &policy, &status, &budget, &j.Outcome, &j.Admitted, &waiting, &dossier, &opened, &updated); err != nil {
		return Job{}, err
	}
	if err := json.Unmarshal([]byte(budget), &j.Budget); err != nil {
		return Job{}, fmt.Errorf("job %s: budget: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(waiting), &j.Waiting); err != nil {
		return Job{}, fmt.Errorf("job %s: waiting: %w", j.ID, err)
	}
	j.Contract, j.Policy, j.Status, j.Dossier = digest.Digest(contract), digest.Digest(policy), JobStatus(status), digest.Digest(dossier)
	j.Opened, j.Updated = fromNanos(opened), fromNanos(updated)
	return j, nil
}

// sortedUnion is the sorted set of a's and b's strings.
func sortedUnion(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// StartRound records that round n of job is dispatched by run (reserving it: a round
// counts against the candidates budget from here). Dispatching a round that an earlier
// apply left running resumes it: its usage so far stays, and its attempts count up. A round
// that ended is not dispatched again.
func (d *DB) StartRound(ctx context.Context, job string, n int, source, runID string) error {
	return d.tx(ctx, fmt.Sprintf("start round %d of job %s", n, job), func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO job_rounds (job_id, n, source, run_id, status, started) VALUES (?, ?, ?, ?, 'running', ?)
ON CONFLICT (job_id, n) DO UPDATE SET run_id = excluded.run_id, source = excluded.source, attempts = attempts + 1
WHERE status = 'running'`, job, n, source, runID, nanos(time.Now()))
		if err != nil {
			return err
		}
		if k, _ := r.RowsAffected(); k != 1 {
			return fmt.Errorf("round %d has ended", n)
		}
		return nil
	})
}

// Part is one part of a round: reserved before it is dispatched, charged when it ends.
type Part string

const (
	PartProposal   Part = "proposal"   // the proposal source: the builder's run, or the wait for a proposal
	PartEvaluation Part = "evaluation" // the candidate's dev, repair and sealed case runs
	PartOracle     Part = "oracle"     // the reference's runs on the builder's oracle requests
)

// Reservation is what one part of a round may take, recorded before the part is
// dispatched: the wall time the budget had left and, for an evaluation, the probes it
// needs. Charging the part releases it (what the part did not use is no longer held); a
// reservation its apply died before charging stays open, and counts as spent (Spent).
type Reservation struct {
	Part   Part          `json:"part"`
	Wall   time.Duration `json:"wall_ns"`
	Probes int           `json:"probes,omitempty"`
	At     time.Time     `json:"at"`
}

// Spent is what r counts as spent, as of now, when its part never ended because its apply
// died: every probe it reserved (the cases may have run), and the wall time from when it
// was made until now, no more than it reserved.
func (r Reservation) Spent(now time.Time) Usage {
	w := min(max(now.Sub(r.At), 0), r.Wall)
	u := Usage{Wall: w, Probes: r.Probes}
	if r.Part == PartProposal {
		u.BuilderWall = w
	} else {
		u.CasesWall = w
	}
	return u
}

// Reserve records res, what part res.Part of running round n of job may take, before that
// part is dispatched, and returns the reservation in force: res, or the one an earlier
// apply made for the same part and died before charging (it still counts from when it was
// made, so that the time that apply spent stays spent when this one charges).
func (d *DB) Reserve(ctx context.Context, job string, n int, res Reservation) (Reservation, error) {
	if res.Part == "" {
		return Reservation{}, errors.New("state: reserve: a reservation is for a part of a round")
	}
	err := d.tx(ctx, fmt.Sprintf("reserve the %s of round %d of job %s", res.Part, n, job), func(tx *sql.Tx) error {
		var status, reserved string
		if err := tx.QueryRowContext(ctx, `SELECT status, reserved FROM job_rounds WHERE job_id = ? AND n = ?`, job, n).Scan(&status, &reserved); err != nil {
			return err
		}
		if RoundStatus(status) != RoundRunning {
			return fmt.Errorf("round %d is not running", n)
		}
		if reserved != "" {
			var old Reservation
			if err := json.Unmarshal([]byte(reserved), &old); err != nil {
				return fmt.Errorf("its reservation: %w", err)
			}
			if old.Part != res.Part {
				return fmt.Errorf("round %d holds a reservation for its %s, never charged", n, old.Part)
			}
			res = old
			return nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE job_rounds SET reserved = ? WHERE job_id = ? AND n = ?`, string(b), job, n)
		return err
	})
	return res, err
}

// RoundEnd is how a round ended: its builder run and candidate (either may be empty) and,
// failed or rejected, its failure as the next round's builder reads it (JSON).
type RoundEnd struct {
	Status             RoundStatus
	Builder, Candidate digest.Digest
	Failure            []byte
}

// Charge adds u, what part of running round n of job used, to the round's usage, and
// releases that part's reservation. The proposal part is marked charged (a resumed round
// does not charge it again: Round.ProposalCharged). With end, the round ends in the same
// transaction, so that no apply can die between an evaluation's charge and the failure it
// found: a resumed round is settled, never evaluated again.
func (d *DB) Charge(ctx context.Context, job string, n int, part Part, u Usage, end *RoundEnd) error {
	if end != nil && end.Status == RoundRunning {
		return errors.New("state: charge: a round that ends is not running")
	}
	return d.tx(ctx, fmt.Sprintf("charge round %d of job %s", n, job), func(tx *sql.Tx) error {
		return charge(ctx, tx, job, n, part, u, end)
	})
}

// ChargeOracle charges u, what answering the oracle requests of running round n of job
// used, releasing the oracle part's reservation, and records o, what was asked and
// answered, in the same transaction: a resumed round whose oracle part was charged has its
// answers, and does not ask again.
func (d *DB) ChargeOracle(ctx context.Context, job string, n int, u Usage, o Oracle) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return d.tx(ctx, fmt.Sprintf("charge the oracle of round %d of job %s", n, job), func(tx *sql.Tx) error {
		if err := charge(ctx, tx, job, n, PartOracle, u, nil); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE job_rounds SET oracle = ? WHERE job_id = ? AND n = ?`, string(b), job, n)
		return err
	})
}

// charge is Charge within tx.
func charge(ctx context.Context, tx *sql.Tx, job string, n int, part Part, u Usage, end *RoundEnd) error {
	var status, used, reserved string
	var charged int
	err := tx.QueryRowContext(ctx, `SELECT status, used, reserved, proposal_charged FROM job_rounds WHERE job_id = ? AND n = ?`, job, n).
		Scan(&status, &used, &reserved, &charged)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("no round %d", n)
	}
	if err != nil {
		return err
	}
	if RoundStatus(status) != RoundRunning {
		return fmt.Errorf("round %d is not running", n)
	}
	var t Usage
	if err := json.Unmarshal([]byte(used), &t); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	t = t.Add(u)
	if reserved != "" {
		var r Reservation
		if err := json.Unmarshal([]byte(reserved), &r); err != nil {
			return fmt.Errorf("its reservation: %w", err)
		}
		switch {
		case part != "" && r.Part == part:
			reserved = "" // released: what the part used is u
		case end != nil:
			t, reserved = t.Add(r.Spent(time.Now())), "" // the round ends with it open: spent
		}
	}
	if part == PartProposal {
		charged = 1
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE job_rounds SET used = ?, reserved = ?, proposal_charged = ? WHERE job_id = ? AND n = ?`,
		string(b), reserved, charged, job, n); err != nil {
		return err
	}
	if end == nil {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE job_rounds SET status = ?, builder_action = ?, candidate = ?, failure = ?, finished = ?
WHERE job_id = ? AND n = ?`, string(end.Status), string(end.Builder), string(end.Candidate), end.Failure, nanos(time.Now()), job, n)
	return err
}

// FinishRound records how round n ended (RoundEnd), charging nothing more: a reservation
// still open is spent. A round ends once.
func (d *DB) FinishRound(ctx context.Context, job string, n int, status RoundStatus, builder, candidate digest.Digest, failure []byte) error {
	if status == RoundRunning {
		return errors.New("state: finish round: a finished round is not running")
	}
	return d.Charge(ctx, job, n, "", Usage{}, &RoundEnd{Status: status, Builder: builder, Candidate: candidate, Failure: failure})
}

// Rounds returns job's rounds in order.
func (d *DB) Rounds(ctx context.Context, job string) ([]Round, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT n, source, run_id, status, builder_action, candidate, failure, brief, used, reserved, proposal_charged, logs, oracle, attempts, started, finished
FROM job_rounds WHERE job_id = ? ORDER BY n`, job)
	if err != nil {
		return nil, fmt.Errorf("state: rounds of job %s: %w", job, err)
	}
	defer rows.Close()
	var out []Round
	for rows.Next() {
		var (
			r                           Round
			status, builder, cand, used string
			brief, reserved, logs       string
			oracle                      string
			started, finished           sql.NullInt64
		)
		if err := rows.Scan(&r.N, &r.Source, &r.RunID, &status, &builder, &cand, &r.Failure, &brief, &used, &reserved, &r.ProposalCharged, &logs, &oracle, &r.Attempts, &started, &finished); err != nil {
			return nil, fmt.Errorf("state: rounds of job %s: %w", job, err)
		}
		if err := json.Unmarshal([]byte(used), &r.Used); err != nil {
			return nil, fmt.Errorf("state: round %d of job %s: usage: %w", r.N, job, err)
		}
		if logs != "" {
			if err := json.Unmarshal([]byte(logs), &r.Logs); err != nil {
				return nil, fmt.Errorf("state: round %d of job %s: logs: %w", r.N, job, err)
			}
		}
		if oracle != "" {
			r.Oracle = new(Oracle)
			if err := json.Unmarshal([]byte(oracle), r.Oracle); err != nil {
				return nil, fmt.Errorf("state: round %d of job %s: oracle: %w", r.N, job, err)
			}
		}
		if reserved != "" {
			r.Reserved = new(Reservation)
			if err := json.Unmarshal([]byte(reserved), r.Reserved); err != nil {
				return nil, fmt.Errorf("state: round %d of job %s: reservation: %w", r.N, job, err)
			}
		}
		r.Job, r.Status, r.Builder, r.Candidate, r.Brief = job, RoundStatus(status), digest.Digest(builder), digest.Digest(cand), digest.Digest(brief)
		r.Started, r.Finished = fromNanos(started), fromNanos(finished)
		out = append(out, r)
	}
	return out, rows.Err()
}

// JobsSpend is what every job's rounds have spent together: the project's ceiling on spend
// stands above all of them.
func (d *DB) JobsSpend(ctx context.Context) (float64, error) {
	var s sql.NullFloat64
	err := d.db.QueryRowContext(ctx, `SELECT SUM(json_extract(used, '$.spend')) FROM job_rounds`).Scan(&s)
	if err != nil {
		return 0, fmt.Errorf("state: spend of all jobs: %w", err)
	}
	return s.Float64, nil
}

// SetBrief records the digest of the brief round n of job was dispatched with: the tree
// the proposer reads (what /job holds).
func (d *DB) SetBrief(ctx context.Context, job string, n int, brief digest.Digest) error {
	return d.tx(ctx, fmt.Sprintf("record the brief of round %d of job %s", n, job), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE job_rounds SET brief = ? WHERE job_id = ? AND n = ?`, string(brief), job, n)
		return err
	})
}

// AddRoundLog adds l, the logs of a run of round n of job, to the round's logs; a run of the
// same name recorded before (by an apply that died in the round) is replaced.
func (d *DB) AddRoundLog(ctx context.Context, job string, n int, l RunLog) error {
	return d.tx(ctx, fmt.Sprintf("record the %s log of round %d of job %s", l.Run, n, job), func(tx *sql.Tx) error {
		var logs string
		if err := tx.QueryRowContext(ctx, `SELECT logs FROM job_rounds WHERE job_id = ? AND n = ?`, job, n).Scan(&logs); err != nil {
			return err
		}
		var all []RunLog
		if logs != "" {
			if err := json.Unmarshal([]byte(logs), &all); err != nil {
				return fmt.Errorf("its logs: %w", err)
			}
		}
		all = slices.DeleteFunc(all, func(o RunLog) bool { return o.Run == l.Run })
		b, err := json.Marshal(append(all, l))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE job_rounds SET logs = ? WHERE job_id = ? AND n = ?`, string(b), job, n)
		return err
	})
}

// Waiting returns the round of job that waits for a proposal from outside, with its
// brief: the running round whose source is source, with no proposal yet. ok is false when
// none does (no apply is running that round).
func (d *DB) Waiting(ctx context.Context, job, source string) (n int, brief digest.Digest, ok bool, err error) {
	var b string
	err = d.db.QueryRowContext(ctx, `SELECT r.n, r.brief FROM job_rounds r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = ? AND r.status = 'running' AND r.source = ? AND j.status = 'open' AND r.brief != ''
AND NOT EXISTS (SELECT 1 FROM proposals p WHERE p.job_id = r.job_id AND p.n = r.n)`, job, source).Scan(&n, &b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("state: the waiting round of job %s: %w", job, err)
	}
	return n, digest.Digest(b), true, nil
}

// Proposal is a proposal sent from outside for one round of a job.
type Proposal struct {
	Job       string
	N         int
	Tree      digest.Digest // its files, a tree manifest in the store
	Source    string        // "cli" (a person, with foundry jobs propose) or "mcp"
	By        string        // who: user@host, or the MCP client's name
	Spend     float64       // what making it cost, as its sender reports it
	Submitted time.Time
}

// SubmitProposal records p for the round of its job that waits for one: that round must be
// running, with source waiting, and have no proposal yet (one per round). It returns the
// round's number.
func (d *DB) SubmitProposal(ctx context.Context, p Proposal, waiting string) (int, error) {
	if p.Spend < 0 {
		return 0, errors.New("state: a proposal's spend is at least 0")
	}
	var n int
	err := d.tx(ctx, "submit a proposal to job "+p.Job, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT r.n FROM job_rounds r JOIN jobs j ON j.id = r.job_id
WHERE r.job_id = ? AND r.status = 'running' AND r.source = ? AND j.status = 'open'
AND NOT EXISTS (SELECT 1 FROM proposals q WHERE q.job_id = r.job_id AND q.n = r.n)`, p.Job, waiting).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no round of job %s waits for a proposal: a round waits while an apply runs it (see foundry jobs show %s)", p.Job, p.Job)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO proposals (job_id, n, tree, source, by, spend, submitted) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.Job, n, string(p.Tree), p.Source, p.By, p.Spend, nanos(time.Now()))
		return err
	})
	return n, err
}

// ProposalFor returns the proposal sent for round n of job, if one was.
func (d *DB) ProposalFor(ctx context.Context, job string, n int) (Proposal, bool, error) {
	p := Proposal{Job: job, N: n}
	var tree string
	var at sql.NullInt64
	err := d.db.QueryRowContext(ctx, `SELECT tree, source, by, spend, submitted FROM proposals WHERE job_id = ? AND n = ?`, job, n).
		Scan(&tree, &p.Source, &p.By, &p.Spend, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Proposal{}, false, nil
	}
	if err != nil {
		return Proposal{}, false, fmt.Errorf("state: the proposal for round %d of job %s: %w", n, job, err)
	}
	p.Tree, p.Submitted = digest.Digest(tree), fromNanos(at)
	return p, true, nil
}
