package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/workspace"
)

// runReport is a run's summary as `foundry report`, `GET /runs/RUN` and the MCP tool
// run_summary give it (spec/cli.md, "Traces and reports"): the trace's summary (every node
// settled with its outcome, times, track and dependencies; the critical path), the steps'
// rows of the state database (cache keys, exit codes, why each failed) and the run's
// capability and product events (suites evaluated, candidates rejected with their
// counterexamples, admissions with the reference published, pins, acceptances, deliveries),
// each delivery's release verified by its receipt and each capability version admitted or
// pinned by its evidence chain, with the project's public key and the keys trusted.
type runReport struct {
	trace.Summary
	Args             []string                `json:"args"`
	Steps            []state.Node            `json:"steps"`
	CapabilityEvents []state.CapabilityEvent `json:"capability_events"`
	Receipts         []deliveryReceipt       `json:"receipts"`
	// Capabilities are the capabilities the run admitted or pinned, each with its evidence chain.
	Capabilities []capabilityChain `json:"capabilities"`
	// Evidence is each step's signed provenance, by address, verified with who signed it.
	Evidence map[string][]reportEvidence `json:"evidence"`
}

// runReportOf reads run runID of ws ("" for the latest) as a runReport, its evidence
// verified with the project's public key and the -trust-key files trust.
func runReportOf(ctx context.Context, ws *workspace.Workspace, runID string, trust []string) (*runReport, error) {
	if runID == "" {
		runs, err := ws.State.Runs(ctx, 1)
		if err != nil {
			return nil, err
		}
		if len(runs) == 0 {
			return nil, errors.New("no run yet: nothing has been applied here")
		}
		runID = runs[0].ID
	}
	r, err := ws.State.GetRun(ctx, runID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("no run %s in this project (see 'foundry status' for the recent ones)", runID)
	}
	if err != nil {
		return nil, err
	}
	rep := &runReport{Args: r.Args, Steps: []state.Node{}, CapabilityEvents: []state.CapabilityEvent{}}
	_, summary := ws.TracePaths(runID)
	if err := trace.Read(summary, &rep.Summary); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("run %s has no trace (it ended before its trace was kept, or was applied by a Foundry that kept none)", runID)
		}
		return nil, err
	}
	if rep.Nodes == nil {
		rep.Nodes = []*trace.Node{}
	}
	// The run's status as the database has it now: a run found dead later is interrupted.
	rep.Status = string(r.Status)
	if rep.Steps, err = ws.State.Nodes(ctx, runID); err != nil {
		return nil, err
	}
	if rep.Steps == nil {
		rep.Steps = []state.Node{}
	}
	ev, err := ws.State.CapabilityEvents(ctx, runID)
	if err != nil {
		return nil, err
	}
	if ev != nil {
		rep.CapabilityEvents = ev
	}
	keys, err := reportKeys(ws, trust)
	if err != nil {
		return nil, fmt.Errorf("reading the public keys to verify the run's evidence with: %w", err)
	}
	rep.Receipts = receiptsOf(ctx, keys, rep.CapabilityEvents)
	rep.Capabilities = chainsOf(ctx, keys, rep.CapabilityEvents)
	if rep.Evidence, err = stepEvidence(ctx, ws, keys, rep.Steps); err != nil {
		return nil, err
	}
	return rep, nil
}

// resolveRun is the run a command names ("" for the latest).
func resolveRun(ctx context.Context, ws *workspace.Workspace, runID string) (string, error) {
	if runID != "" {
		if _, err := ws.State.GetRun(ctx, runID); errors.Is(err, state.ErrNotFound) {
			return "", fmt.Errorf("no run %s in this project (see 'foundry status' for the recent ones)", runID)
		} else if err != nil {
			return "", err
		}
		return runID, nil
	}
	runs, err := ws.State.Runs(ctx, 1)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", errors.New("no run yet: nothing has been applied here")
	}
	return runs[0].ID, nil
}

// writeOut writes what write makes to path, or to stdout for "-" or "".
func writeOut(env *cliEnv, path string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(env.stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func init() {
	register(&command{
		name:    "trace",
		summary: "Write the trace of a run in the Chrome trace event format",
		usage:   "foundry trace [options] [RUN]",
		help: `
Trace writes the trace kept with run RUN (default the latest) of the project in -C DIR
(default the current directory), in the Chrome trace event format that Perfetto
(ui.perfetto.dev) and chrome://tracing open: a track per executor slot, a span per node
and per phase of its work, cache hits as instant events, and the critical path on a track
of its own (spec/cli.md, "Traces and reports").

Examples:
  foundry trace -o build.trace.json
  foundry trace 20261129T182501-3f2a -o old.trace.json

Exit codes: 0 success, 1 no state, unknown run or no trace, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			out := fs.String("o", "-", "write to `FILE` (- for standard output)")
			dir := fs.String("C", ".", "the project `DIR`")
			return func(env *cliEnv, args []string) int {
				if len(args) > 1 {
					return usageError(env, "trace", "want at most one RUN")
				}
				ws, ok := openExistingWorkspace(env, "trace", *dir)
				if !ok {
					return exitError
				}
				defer ws.Close()
				id, err := resolveRun(context.Background(), ws, firstArg(args))
				if err == nil {
					err = copyTrace(env, ws, id, *out)
				}
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry trace: %v\n", err)
					return exitError
				}
				return exitOK
			}
		},
	})
	register(&command{
		name:    "report",
		summary: "Write a run's report: one self-contained HTML file",
		usage:   "foundry report [options] [RUN]",
		help: `
Report writes one HTML file about run RUN (default the latest) of the project in -C DIR
that opens in any browser without a network: the summary (what ran, was cached, built,
fetched, failed or was skipped, with times), a timeline of the executor slots, the graph
drawn as SVG with each node coloured by its outcome and linked to its details, the critical
path, each capability's and product's evidence as the run recorded it (suites evaluated,
candidates rejected with their counterexamples, the version admitted or pinned, acceptance),
the evidence chain of each capability version admitted or pinned (admission summary, sealed
test results, provenance) and the delivery receipts, each version or release verified as
'foundry verify -key' verifies it, with the project's public key and each -trust-key, and
each envelope with the key that signed it, and the failures with why. A version pinned from
a registry that another project admitted to verifies only with that project's key
(-trust-key, as plan and apply were given it); without it, it is shown NOT VERIFIED with
the reason, as is any version or release that no longer verifies, and the report is still
written. With -json it writes the run's summary as JSON instead (as GET /runs/RUN of
'foundry serve -runs' and the MCP tool run_summary return it).

Examples:
  foundry report -o report.html
  foundry report -json 20261129T182501-3f2a
  foundry report -trust-key ../team/.foundry/keys/signing.pub -o report.html

Exit codes: 0 success, 1 no state, unknown run or no trace, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			out := fs.String("o", "-", "write to `FILE` (- for standard output)")
			dir := fs.String("C", ".", "the project `DIR`")
			jsonOut := fs.Bool("json", false, "write the run's summary as JSON")
			var trust stringList
			fs.Var(&trust, "trust-key", "also trust this public key `PEM` when verifying the run's evidence, such as a capability pinned from another project's registry (repeatable; the project's own key is always trusted)")
			return func(env *cliEnv, args []string) int {
				if len(args) > 1 {
					return usageError(env, "report", "want at most one RUN")
				}
				ws, ok := openExistingWorkspace(env, "report", *dir)
				if !ok {
					return exitError
				}
				defer ws.Close()
				rep, err := runReportOf(context.Background(), ws, firstArg(args), trust)
				if err == nil {
					err = writeOut(env, *out, func(w io.Writer) error {
						if *jsonOut {
							writeJSON(w, rep)
							return nil
						}
						return writeReportHTML(w, rep)
					})
				}
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry report: %v\n", err)
					return exitError
				}
				return exitOK
			}
		},
	})
}

// copyTrace writes run id's kept trace to out.
func copyTrace(env *cliEnv, ws *workspace.Workspace, id, out string) error {
	events, _ := ws.TracePaths(id)
	b, err := os.ReadFile(events)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run %s has no trace (it ended before its trace was kept, or was applied by a Foundry that kept none)", id)
	}
	if err != nil {
		return err
	}
	return writeOut(env, out, func(w io.Writer) error { _, err := w.Write(b); return err })
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
