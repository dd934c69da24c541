package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/internal/capped"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/store"
)

func init() {
	register(&command{
		name:    "jobs",
		summary: "List reconstruction jobs, or show one's rounds, counterexamples and spend",
		usage:   "foundry jobs [list] [-C DIR] [-json] | show JOB|CAPABILITY [-C DIR] [-lines N] [-json] | brief JOB [-o DIR] [-json] | propose JOB DIR [-spend N]",
		help: `
Jobs shows the reconstruction jobs of the project at -C (default: the current directory).
A job acquires a capability that has no admitted version and no feasible recipe, through
its reconstruct block (capability.md section 5a): round after round, its builder proposes
a candidate from the job's files and the earlier rounds' counterexamples, and the
evaluator judges it. There is one job per contract digest, target platform and trust
policy; every apply that needs the capability joins it, and an apply killed mid-job
resumes it.

  list (the default)   every job, the most recently updated first: its status (open,
                       admitted, exhausted, unresolved), rounds and what they spent
  show JOB             one job, round by round: the source that proposed, the candidate,
                       how it failed (the counterexample: input, expected, got), what
                       the round used (CPU, wall time, peak memory, bytes written, probes,
                       interventions, spend) and what its builder and build wrote (the
                       last -lines lines of stderr and stdout, and why a run failed):
                       what the builder observed. Then the job's outcome
  brief JOB            the brief of the job's round that waits for a proposal from
                       outside (a reconstruct block with a proposals block, while an
                       apply runs it): the files a builder would find at /job — the
                       contract, schemas, dev and repair cases and the counterexamples
                       of earlier rounds, never a sealed case. -o DIR writes them there
  propose JOB DIR      send the files under DIR as the proposal for that round (DIR
                       holds what the proposals block names, e.g. DIR/out/tool). It is
                       untrusted like any proposal: the apply packages it, evaluates it
                       and admits it only on a sealed pass. A proposal made this way
                       counts as a person's intervention; -spend says what it cost

JOB is a job ID (job-<16 hex>) or a prefix only it has, or the capability (sorter or
capability.sorter) when one job has it.

Examples:
  foundry jobs
  foundry jobs show capability.int-sort
  foundry jobs show job-3f2a -json
  foundry jobs brief sorter -o /tmp/brief && foundry jobs propose sorter ./proposal

Exit codes: 0 done, 1 no such job (or no state), or the state could not be read, 2 usage
error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			project := fs.String("C", ".", "project `DIR`")
			jsonOut := fs.Bool("json", false, "print JSON")
			out := fs.String("o", "", "brief: write the brief's files under `DIR`")
			spend := fs.Float64("spend", 0, "propose: what making the proposal cost, in the project's unit of spend")
			lines := fs.Int("lines", defaultLogLines, "show: print the last `N` lines of each round's builder and build logs (0: all)")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "jobs", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				return runAction(usage, args, "list",
					action{"list", 0, "list takes no arguments (the project is -C DIR)", func([]string) int {
						return listJobs(env, *project, *jsonOut)
					}},
					action{"show", 1, "show wants exactly one job ID or capability", func(args []string) int {
						if *lines < 0 {
							return usage("-lines %d: want 0 (the whole log) or more", *lines)
						}
						return showJob(env, *project, args[0], *lines, *jsonOut)
					}},
					action{"brief", 1, "brief wants exactly one job ID or capability", func(args []string) int {
						return jobBrief(env, *project, args[0], *out, *jsonOut)
					}},
					action{"propose", 2, "propose wants a job ID or capability and the directory of the proposal", func(args []string) int {
						if *spend < 0 {
							return usage("-spend %v: what a proposal cost is at least 0", *spend)
						}
						return jobPropose(env, *project, args[0], args[1], *spend, *jsonOut)
					}})
			}
		},
	})
}

// jobJSON is a job as `foundry jobs -json` prints it.
type jobJSON struct {
	ID         string          `json:"id"`
	Capability string          `json:"capability"`
	Contract   digest.Digest   `json:"contract"`
	Target     string          `json:"target"`
	Policy     digest.Digest   `json:"policy"`
	Status     state.JobStatus `json:"status"`
	Budget     state.JobBudget `json:"budget"`
	Used       state.Usage     `json:"used"`
	Rounds     int             `json:"rounds"`
	Waiting    []string        `json:"waiting"`
	// Dossier is the digest of the job's reference dossier (spec/capability.md §5b).
	Dossier  digest.Digest `json:"dossier,omitempty"`
	Outcome  string        `json:"outcome,omitempty"`
	Admitted string        `json:"admitted,omitempty"`
	Opened   time.Time     `json:"opened"`
	Updated  time.Time     `json:"updated"`
	// RoundList is set by show.
	RoundList []roundJSON `json:"round_list,omitempty"`
}

// roundJSON is one round as `foundry jobs show -json` prints it.
type roundJSON struct {
	N         int                 `json:"n"`
	Source    string              `json:"source"`
	Run       string              `json:"run"`
	Status    state.RoundStatus   `json:"status"`
	Builder   digest.Digest       `json:"builder_action,omitempty"`
	Candidate digest.Digest       `json:"candidate,omitempty"`
	Failure   *evaluate.Rejection `json:"failure,omitempty"`
	Used      state.Usage         `json:"used"`
	// Logs are what the round's runs (its builder's, its build's) wrote, the last lines
	// of each stream: what the builder observed, and why a run failed.
	Logs []runLogJSON `json:"logs,omitempty"`
	// Oracle is what the round's builder asked the references as an oracle: requests
	// asked, answered (each a probe) and refused, and the answers' digest.
	Oracle   *state.Oracle `json:"oracle,omitempty"`
	Attempts int           `json:"attempts"`
	Started  time.Time     `json:"started"`
	Finished *time.Time    `json:"finished,omitempty"`
}

// runLogJSON is one run of a round as `foundry jobs show -json` prints it: its logs by
// digest, their last lines (logTailLines of each), and why it failed.
type runLogJSON struct {
	Run        string        `json:"run"` // builder or build
	Stdout     digest.Digest `json:"stdout,omitempty"`
	Stderr     digest.Digest `json:"stderr,omitempty"`
	StdoutTail []string      `json:"stdout_tail,omitempty"`
	StderrTail []string      `json:"stderr_tail,omitempty"`
	Error      string        `json:"error,omitempty"`
	// Missing names a log that is no longer in the store (garbage-collected).
	Missing []string `json:"missing,omitempty"`
}

// defaultLogLines is how many of a log's last lines jobs show prints unless -lines says.
const defaultLogLines = 20

// roundLogs reads the logs of a round's runs from the project's content store at dir: the
// last lines of each (all of them when lines is 0).
func roundLogs(dir string, logs []state.RunLog, lines int) ([]runLogJSON, error) {
	if len(logs) == 0 {
		return nil, nil
	}
	st, err := store.Open(filepath.Join(dir, workspace.StateDir, "blobs"))
	if err != nil {
		return nil, err
	}
	var out []runLogJSON
	for _, l := range logs {
		v := runLogJSON{Run: l.Run, Stdout: l.Stdout, Stderr: l.Stderr, Error: l.Error}
		for _, s := range []struct {
			name string
			d    digest.Digest
			tail *[]string
		}{{"stdout", l.Stdout, &v.StdoutTail}, {"stderr", l.Stderr, &v.StderrTail}} {
			if s.d == "" {
				continue
			}
			b, err := st.Get(s.d)
			if err != nil {
				v.Missing = append(v.Missing, s.name)
				continue
			}
			if len(b) > 0 {
				n := lines
				if n <= 0 {
					n = bytes.Count(b, []byte("\n")) + 1
				}
				*s.tail = capped.TailLines(b, n)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// openJobs opens the project's state database, or returns nil when it has none.
func openJobs(env *cliEnv, dir string) (*state.DB, bool) {
	p := filepath.Join(dir, workspace.StateDir, "state.db")
	if !fileExists(p) {
		return nil, true
	}
	db, err := state.OpenState(p)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry jobs: %v\n", err)
		return nil, false
	}
	return db, true
}

// jobView is job j with its rounds, as the command prints it.
// With rounds, dir is the project, whose content store holds the rounds' logs, of which
// it has the last lines (all when 0).
func jobView(ctx context.Context, db *state.DB, j state.Job, withRounds bool, dir string, lines int) (jobJSON, error) {
	rounds, err := db.Rounds(ctx, j.ID)
	if err != nil {
		return jobJSON{}, err
	}
	v := jobJSON{ID: j.ID, Capability: j.Capability, Contract: j.Contract, Target: j.Target, Policy: j.Policy, Status: j.Status,
		Budget: j.Budget, Rounds: len(rounds), Waiting: j.Waiting, Dossier: j.Dossier, Outcome: j.Outcome, Admitted: j.Admitted, Opened: j.Opened, Updated: j.Updated}
	if v.Waiting == nil {
		v.Waiting = []string{}
	}
	for _, r := range rounds {
		v.Used = v.Used.Add(r.Used)
		if !withRounds {
			continue
		}
		rj := roundJSON{N: r.N, Source: r.Source, Run: r.RunID, Status: r.Status, Builder: r.Builder, Candidate: r.Candidate,
			Used: r.Used, Oracle: r.Oracle, Attempts: r.Attempts, Started: r.Started}
		if !r.Finished.IsZero() {
			rj.Finished = &r.Finished
		}
		if rj.Logs, err = roundLogs(dir, r.Logs, lines); err != nil {
			return jobJSON{}, fmt.Errorf("job %s: round %d's logs: %w", j.ID, r.N, err)
		}
		if len(r.Failure) > 0 {
			rj.Failure = &evaluate.Rejection{}
			if err := json.Unmarshal(r.Failure, rj.Failure); err != nil {
				return jobJSON{}, fmt.Errorf("job %s: round %d's failure: %w", j.ID, r.N, err)
			}
		}
		v.RoundList = append(v.RoundList, rj)
	}
	return v, nil
}

func listJobs(env *cliEnv, dir string, jsonOut bool) int {
	db, ok := openJobs(env, dir)
	if !ok {
		return exitError
	}
	ctx := context.Background()
	out := []jobJSON{}
	if db != nil {
		defer db.Close()
		jobs, err := db.Jobs(ctx)
		if err != nil {
			fmt.Fprintf(env.stderr, "foundry jobs: %v\n", err)
			return exitError
		}
		for _, j := range jobs {
			v, err := jobView(ctx, db, j, false, dir, 0)
			if err != nil {
				fmt.Fprintf(env.stderr, "foundry jobs: %v\n", err)
				return exitError
			}
			out = append(out, v)
		}
	}
	if jsonOut {
		writeJSON(env.stdout, out)
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintln(env.stdout, "No reconstruction jobs are recorded.")
		return exitOK
	}
	fmt.Fprintf(env.stdout, "%-20s  %-10s  %-24s  %-7s  %s\n", "JOB", "STATUS", "CAPABILITY", "ROUNDS", "SPENT")
	for _, v := range out {
		fmt.Fprintf(env.stdout, "%-20s  %-10s  %-24s  %-7s  %s\n", v.ID, v.Status, "capability."+v.Capability,
			fmt.Sprintf("%d/%d", v.Rounds, v.Budget.Candidates), usageLine(v.Used, v.Budget))
	}
	return exitOK
}

func showJob(env *cliEnv, dir, which string, lines int, jsonOut bool) int {
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry jobs: "+format+"\n", a...)
		return exitError
	}
	db, ok := openJobs(env, dir)
	if !ok {
		return exitError
	}
	if db == nil {
		return failed("no job %s: %s has no %s/state.db (nothing has been applied here)", which, dir, workspace.StateDir)
	}
	defer db.Close()
	ctx := context.Background()
	j, err := findJob(ctx, db, dir, which)
	if err != nil {
		return failed("%v", err)
	}
	v, err := jobView(ctx, db, j, true, dir, lines)
	if err != nil {
		return failed("%v", err)
	}
	if jsonOut {
		writeJSON(env.stdout, v)
		return exitOK
	}
	writeJob(env.stdout, v, lines)
	return exitOK
}

// jobBrief prints (or writes under out) the brief of the round of job which that waits for
// a proposal.
func jobBrief(env *cliEnv, dir, which, out string, jsonOut bool) int {
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry jobs: "+format+"\n", a...)
		return exitError
	}
	ws, j, err := openJobWorkspace(dir, which)
	if err != nil {
		return failed("%v", err)
	}
	defer ws.Close()
	b, err := reconstruct.WaitingBrief(context.Background(), ws, j.ID)
	if err != nil {
		return failed("%v", err)
	}
	paths := slices.Sorted(maps.Keys(b.Files))
	if out != "" {
		for _, p := range paths {
			dst := filepath.Join(out, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return failed("%v", err)
			}
			if err := os.WriteFile(dst, b.Files[p], 0o644); err != nil {
				return failed("%v", err)
			}
		}
	}
	if jsonOut {
		files := map[string]string{}
		for p, data := range b.Files {
			files[p] = string(data)
		}
		writeJSON(env.stdout, map[string]any{"job": b.Job, "round": b.Round, "brief": b.Tree, "files": files})
		return exitOK
	}
	fmt.Fprintf(env.stdout, "%s round %d waits for a proposal; its brief %s holds:\n", b.Job, b.Round, b.Tree.Short())
	for _, p := range paths {
		fmt.Fprintf(env.stdout, "  %s (%d bytes)\n", p, len(b.Files[p]))
	}
	if out != "" {
		fmt.Fprintf(env.stdout, "written under %s\n", out)
	}
	return exitOK
}

// jobPropose sends the files under src as the proposal for job which's waiting round.
func jobPropose(env *cliEnv, dir, which, src string, spend float64, jsonOut bool) int {
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry jobs: "+format+"\n", a...)
		return exitError
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return failed("propose: %s is not a directory holding the proposal's files", src)
	}
	ws, j, err := openJobWorkspace(dir, which)
	if err != nil {
		return failed("%v", err)
	}
	defer ws.Close()
	n, err := reconstruct.SubmitProposal(context.Background(), ws, j.ID, src, "cli", operator(), spend)
	if err != nil {
		return failed("%v", err)
	}
	if jsonOut {
		writeJSON(env.stdout, map[string]any{"job": j.ID, "round": n})
		return exitOK
	}
	fmt.Fprintf(env.stdout, "Sent to %s round %d: the apply running it evaluates it now (foundry jobs show %s).\n", j.ID, n, j.ID)
	return exitOK
}

// openJobWorkspace opens the project's workspace and finds the job which names.
func openJobWorkspace(dir, which string) (*workspace.Workspace, state.Job, error) {
	if !fileExists(filepath.Join(dir, workspace.StateDir, "state.db")) {
		return nil, state.Job{}, fmt.Errorf("no job %s: %s has no %s/state.db (nothing has been applied here)", which, dir, workspace.StateDir)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, state.Job{}, err
	}
	j, err := findJob(context.Background(), ws.State, dir, which)
	if err != nil {
		ws.Close()
		return nil, state.Job{}, err
	}
	return ws, j, nil
}

// findJob is the job which names in db: its ID, a prefix only it has, or its capability
// (sorter or capability.sorter) when one job has it.
func findJob(ctx context.Context, db *state.DB, dir, which string) (state.Job, error) {
	jobs, err := db.Jobs(ctx)
	if err != nil {
		return state.Job{}, err
	}
	capName := strings.TrimPrefix(which, "capability.")
	var matches []state.Job
	for _, j := range jobs {
		if j.ID == which {
			return j, nil
		}
		if strings.HasPrefix(j.ID, which) || j.Capability == capName {
			matches = append(matches, j)
		}
	}
	switch len(matches) {
	case 0:
		return state.Job{}, fmt.Errorf("no job %s in %s (see 'foundry jobs')", which, dir)
	case 1:
		return matches[0], nil
	}
	var ids []string
	for _, j := range matches {
		ids = append(ids, j.ID)
	}
	return state.Job{}, fmt.Errorf("%s names %d jobs (%s): give a longer job ID", which, len(matches), strings.Join(ids, ", "))
}

// usageLine says what a job used against its budget.
func usageLine(u state.Usage, b state.JobBudget) string {
	return fmt.Sprintf("%d/%d probes, %s/%s wall, %g/%g spend", u.Probes, b.Probes, u.Wall.Round(time.Millisecond), b.Wall, u.Spend, b.Spend)
}

func writeJob(w io.Writer, v jobJSON, lines int) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	fmt.Fprintf(w, "%s  %s\n", v.ID, v.Status)
	fmt.Fprintf(w, "  %-10s capability.%s, contract %s, target %s, policy %s\n", "job", v.Capability, v.Contract.Short(), v.Target, v.Policy.Short())
	fmt.Fprintf(w, "  %-10s %d candidates, %d probes, %s wall, %s scratch per proposal, %g spend\n", "budget",
		v.Budget.Candidates, v.Budget.Probes, v.Budget.Wall, lang.FormatSize(v.Budget.Scratch), v.Budget.Spend)
	fmt.Fprintf(w, "  %-10s %d round(s); %s; %s CPU\n", "spent", v.Rounds, usageLine(v.Used, v.Budget), v.Used.CPU.Round(time.Millisecond))
	if len(v.Waiting) > 0 {
		fmt.Fprintf(w, "  %-10s %s\n", "waiting", strings.Join(v.Waiting, ", "))
	}
	if v.Dossier != "" {
		fmt.Fprintf(w, "  %-10s reference dossier %s\n", "dossier", v.Dossier)
	}
	fmt.Fprintf(w, "  %-10s opened %s, updated %s\n", "times", ts(v.Opened), ts(v.Updated))
	for _, r := range v.RoundList {
		fmt.Fprintf(w, "\n  round %d  %s  (%s, run %s", r.N, r.Status, r.Source, r.Run)
		if r.Attempts > 1 {
			fmt.Fprintf(w, ", dispatched %d times", r.Attempts)
		}
		fmt.Fprintln(w, ")")
		if r.Candidate != "" {
			fmt.Fprintf(w, "    %-10s %s\n", "candidate", r.Candidate)
		}
		u := r.Used
		build := ""
		if u.BuildWall > 0 {
			build = ", build " + u.BuildWall.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "    %-10s %s wall (builder %s%s, cases %s), %s CPU, %s peak memory, %s written, %d probe(s), %d intervention(s), %g spend\n", "used",
			u.Wall.Round(time.Millisecond), u.BuilderWall.Round(time.Millisecond), build, u.CasesWall.Round(time.Millisecond),
			u.CPU.Round(time.Millisecond), humanBytes(u.PeakMemory), humanBytes(u.Written), u.Probes, u.Interventions, u.Spend)
		if o := r.Oracle; o != nil {
			fmt.Fprintf(w, "    %-10s %d request(s) asked, %d answered (charged as probes), %d refused; answers %s\n", "oracle", o.Asked, o.Answered, o.Refused, o.Answers.Short())
		}
		if f := r.Failure; f != nil {
			fmt.Fprintf(w, "    %s\n", strings.TrimSpace(strings.ReplaceAll(f.String(), "\n", "\n  ")))
		}
		for _, l := range r.Logs {
			status := "ran"
			if l.Error != "" {
				status = "failed: " + l.Error
			}
			fmt.Fprintf(w, "    %-10s %s\n", l.Run, strings.ReplaceAll(status, "\n", "\n      "))
			for _, s := range []struct {
				name string
				tail []string
			}{{"stderr", l.StderrTail}, {"stdout", l.StdoutTail}} {
				if len(s.tail) == 0 {
					continue
				}
				if lines > 0 {
					fmt.Fprintf(w, "      %s (its last %d lines at most):\n", s.name, lines)
				} else {
					fmt.Fprintf(w, "      %s:\n", s.name)
				}
				for _, line := range s.tail {
					fmt.Fprintf(w, "        | %s\n", line)
				}
			}
			for _, m := range l.Missing {
				fmt.Fprintf(w, "      %s: no longer in the store (garbage-collected)\n", m)
			}
		}
	}
	if v.Outcome != "" {
		fmt.Fprintf(w, "\n  outcome: %s\n", strings.ReplaceAll(v.Outcome, "\n", "\n  "))
	}
}

// humanBytes writes n bytes in the largest binary unit not above it, to one decimal.
func humanBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + units[u]
}
