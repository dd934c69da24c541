package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
)

func init() {
	register(&command{
		name:    "apply",
		summary: "Run the plan: every step in a sandbox, cached results reused",
		usage:   "foundry apply [options] [DIR | PLANFILE]",
		help: `
Apply plans the project in DIR (default: the current directory) and carries the plan out:
seeds become images, each step runs in a sandbox (read-only root, read-only inputs,
writable /out and /tmp, loopback-only network, non-root, limits and a deadline), and each
success is stored in the action cache under its action digest. Steps whose action digest
is cached are not run again; a failed step is never cached, and whatever needs it is
skipped and reported once.

Given a PLANFILE saved by 'foundry plan -out', apply first checks that the configuration
and every input still match it exactly, and refuses, naming what changed and writing
nothing, if not.

SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) interrupt an
apply: the running steps are stopped and their sandboxes removed, the run is recorded as
interrupted, and apply exits 1 saying so. A killed apply (SIGKILL, a crash) leaves no
half-written results either. Run it again and it finishes the work, without re-running the
steps that had completed, after removing whatever the killed run left.

A product with a deliver block is delivered once its steps and checks pass, to a destination
the operator's grants file allows (-grants FILE, else $FOUNDRY_GRANTS, else
$XDG_CONFIG_HOME/foundry/grants.hcl; never a file in the project unless named): a plan with a
product that needs a grant is refused before anything runs, naming the grant to add. The
release gets a signed delivery receipt that 'foundry verify' checks (spec/grants.md).

A fixed-output step (network = "egress") reaches the network only through the broker
Foundry runs for it, to the hosts it names that the grants file allows (grant "network"),
and only with its outputs pinned by output_digest: other outputs fail it, and nothing of
them is stored. A plan with such a step that needs a grant is refused the same way.

One project is applied by one process at a time: an apply started while another holds the
project's lock (.foundry/apply.lock, released by the kernel if its holder dies) says once
that it is waiting, naming the holder's pid and since when, and starts once it is free, so
that applies queue up. -lock-timeout bounds the wait: past it, apply exits 1 saying so, with
nothing run. SIGINT while waiting exits 1 too, with nothing run.

-rebuild ADDRESS (repeatable) checks that a step is reproducible: the step, whose result
must be cached, runs again in a fresh sandbox with every cache volume it mounts empty, and
each output is compared byte for byte with the cached one. A difference fails the apply
(exit 1), naming each differing file with both digests and sizes, the first differing byte
and, for text, the first differing lines; the cached result stays. An identical rebuild is
recorded as signed provenance that names the execution it reproduced, which 'foundry verify'
shows as "reproduced independently, without caches".

Without -auto-approve, apply shows the plan and asks for confirmation on a terminal; a
saved plan is its own approval.

With -engine temporal, steps run on 'foundry worker' processes instead, through a
Temporal cluster (-temporal-address): one workflow per apply, one activity per step, content
carried by a registry every worker reaches (the project's, or -temporal-registry). Caching,
evaluations, signing, publishing and delivery stay here, so the action digests, outputs and
provenance subjects are the embedded engine's; provenance names the worker (spec/temporal.md).

Examples:
  foundry apply -auto-approve
  foundry plan -out hello.plan && foundry apply hello.plan
  foundry apply -auto-approve -progress plain -parallelism 8 examples/hello
  foundry apply -auto-approve -executor runc
  foundry apply -auto-approve -lock-timeout 10m
  foundry apply -auto-approve -rebuild step.build
  foundry apply -auto-approve -engine temporal -temporal-address 127.0.0.1:7233

Exit codes: 0 success, 1 a step failed or the configuration is invalid or the saved plan
is stale or the apply was interrupted or -lock-timeout passed, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			var ex executorFlags
			ex.register(fs)
			var eng engineFlags
			eng.register(fs)
			auto := fs.Bool("auto-approve", false, "apply without asking for confirmation")
			par := fs.Int("parallelism", 4, "run at most `N` steps at once")
			prog := fs.String("progress", "auto", "progress `MODE`: auto, tty (live view), plain (a line per event) or json (one event per line)")
			var trust stringList
			fs.Var(&trust, "trust-key", "also trust this public key `PEM` for admitted capabilities pulled from the registry (repeatable; the project's own key is always trusted)")
			var sel selectFlags
			sel.register(fs, true)
			keyPath := fs.String("signing-key", "", "private key `FILE` that signs provenance (default $FOUNDRY_SIGNING_KEY, else the project's .foundry/keys/signing.key, made on first use)")
			grants := registerGrants(fs)
			traceOut := fs.String("trace", "", "also write the apply's trace to `FILE` (Chrome trace event format; it is kept with the run either way: foundry trace)")
			var rebuild stringList
			fs.Var(&rebuild, "rebuild", "run the cached step or check `ADDRESS` again in a fresh sandbox with empty caches and compare its outputs byte for byte (repeatable)")
			lockTimeout := fs.Duration("lock-timeout", 0, "wait at most `DURATION` for another apply of this project to finish; 0 waits as long as it takes")
			return func(env *cliEnv, args []string) int {
				if len(args) > 1 {
					fmt.Fprintln(env.stderr, "foundry apply: want at most one DIR or PLANFILE")
					return exitUsage
				}
				if *par < 1 {
					fmt.Fprintln(env.stderr, "foundry apply: -parallelism must be at least 1")
					return exitUsage
				}
				if *lockTimeout < 0 {
					fmt.Fprintln(env.stderr, "foundry apply: -lock-timeout must be 0 (wait as long as it takes) or more")
					return exitUsage
				}
				if err := eng.check(env); err != nil {
					return usageError(env, "apply", "%v", err)
				}
				if eng.name == "temporal" && !flagGiven(fs, "parallelism") {
					// Workers bound what runs at once; the apply only keeps them fed.
					*par = defaultTemporalParallelism
				}
				target := "."
				if len(args) == 1 {
					target = args[0]
				}
				var saved *plan.Plan
				dir := target
				if st, err := os.Stat(target); err == nil && !st.IsDir() {
					p, err := plan.Load(target)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
						return exitError
					}
					saved, dir = p, p.Project.Dir
					if p.Invocation != nil {
						v.vars, v.varFiles = p.Invocation.Vars, p.Invocation.VarFiles
					}
					if len(sel.targets)+len(sel.replace) > 0 {
						fmt.Fprintln(env.stderr, "foundry apply: a saved plan carries its own -target and -replace; give them to 'foundry plan -out'")
						return exitUsage
					}
					sel.targets, sel.replace = p.Targets, p.Replace
				}
				g, _, saveStat := loadGraphUnsaved(env, dir, &v, false)
				if g == nil {
					return exitError
				}
				if saved != nil {
					// Before anything is written: a stale plan leaves the project as it was.
					// Staleness is a matter of digests only (not of the cache, registry or
					// quarantine), so a plan without the workspace decides it.
					fresh, err := plan.Make(g, plan.Options{Selection: sel.selection()})
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
						return exitError
					}
					if reasons := plan.StaleReasons(saved, fresh); len(reasons) > 0 {
						fmt.Fprintf(env.stderr, "foundry apply: the saved plan %s is stale; nothing was run or written. Since it was made:\n", target)
						for _, r := range reasons {
							fmt.Fprintf(env.stderr, "  - %s\n", r)
						}
						fmt.Fprintln(env.stderr, "Run 'foundry plan -out FILE' again.")
						return exitError
					}
				}
				ctx, stop := notifyInterrupt(context.Background())
				defer stop()
				out, code := applyProject(ctx, env, applyRequest{
					dir: dir, g: g, sel: sel.selection(), trust: trust, signingKey: *keyPath, grants: *grants,
					parallelism: *par, ex: &ex, engine: &eng, ask: saved == nil && !*auto, lockTimeout: *lockTimeout, rebuild: rebuild,
					saveCaches: saveStat,
					events: func() (func(event.Event), func(), error) {
						pr, err := newProgress(*prog, env.stderr)
						if err != nil {
							return nil, nil, err
						}
						return pr.event, pr.close, nil
					},
				})
				if *traceOut != "" && out.result != nil && out.result.RunID != "" {
					if err := writeTraceOf(env, dir, out.result.RunID, *traceOut); err != nil {
						fmt.Fprintf(env.stderr, "foundry apply: the trace: %v\n", err)
						return max(code, exitError)
					}
				}
				return code
			}
		},
	})
}

// writeTraceOf writes the trace kept with run id of the project in dir to path.
func writeTraceOf(env *cliEnv, dir, id, path string) error {
	ws, err := workspace.Open(dir)
	if err != nil {
		return err
	}
	defer ws.Close()
	return copyTrace(env, ws, id, path)
}

// applyRequest is one apply of a loaded project, under the operator's settings: the
// trusted keys, the signing key, the executor and how many steps run at once.
type applyRequest struct {
	dir         string
	g           *graph.Graph
	sel         plan.Selection
	trust       []string // -trust-key files, beside the project's own key
	signingKey  string   // -signing-key, "" for the default
	grants      string   // -grants, "" for the operator's default (loadGrants)
	parallelism int
	ex          *executorFlags
	engine      *engineFlags  // nil: the embedded engine
	ask         bool          // show the plan and ask for approval on a terminal first
	lockTimeout time.Duration // how long to wait for another apply's lock; 0 waits as long as it takes
	rebuild     []string      // -rebuild addresses
	// saveCaches writes the stat and graph caches of the load that made g (loadGraphUnsaved's
	// saveStat); nil if the caller saved them. It is called once the state directory exists,
	// so that the first apply of a project saves them too.
	saveCaches func()
	// events starts the progress display once the plan is approved: it returns where the
	// apply's events go and the function that ends the display.
	events func() (emit func(event.Event), done func(), err error)
}

// applyOutcome is what an apply did: its plan, and the run's result (nil when nothing ran).
type applyOutcome struct {
	plan   *plan.Plan
	result *run.Result
}

// applyProject plans the loaded project under the workspace's lock and carries the plan
// out, reporting on env as 'foundry apply' does; it returns what it did and the exit code.
// The caller has refused a stale saved plan first (which writes nothing). An interruption
// is ctx's cancellation with an *interruption as its cause.
func applyProject(ctx context.Context, env *cliEnv, req applyRequest) (out applyOutcome, code int) {
	dir, g := req.dir, req.g
	grants, ok := loadGrants(env, "apply", dir, req.grants)
	if !ok {
		return out, exitError
	}
	req.sel.Grants = grants
	ws, err := workspace.Open(dir)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	defer ws.Close()
	if req.saveCaches != nil {
		req.saveCaches()
	}
	// Held from planning through applying: the plan's cache lookups stay true (nothing can
	// collect their blobs meanwhile), so apply reuses them. Another apply of the project
	// holding it is waited for, as long as -lock-timeout allows.
	lockCtx := ctx
	if req.lockTimeout > 0 {
		var cancel context.CancelFunc
		lockCtx, cancel = context.WithTimeoutCause(ctx, req.lockTimeout, errLockTimeout)
		defer cancel()
	}
	unlock, err := ws.LockContext(lockCtx, lockWaiting(env, "apply"))
	if err != nil {
		var busy *workspace.BusyError
		switch i := interrupted(ctx); {
		case i != nil:
			fmt.Fprintf(env.stderr, "foundry apply: %v while waiting for another apply of this project to finish; nothing was run.\n", i)
		case errors.As(err, &busy) && errors.Is(err, errLockTimeout):
			held := req.lockTimeout
			if !busy.Holder.Since.IsZero() {
				held = time.Since(busy.Holder.Since)
			}
			fmt.Fprintf(env.stderr, "foundry apply: another apply of this project has held the lock for %s (%s); nothing was run.\n",
				held.Round(10*time.Millisecond), holderPID(busy.Holder))
		default:
			fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		}
		return out, exitError
	}
	defer unlock()
	reg, err := projectRegistry(g, true)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: registry: %v\n", err)
		return out, exitError
	}
	keys, err := trustedKeys(dir, req.trust)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	planned, err := plan.ForWorkspace(ctx, ws, g, reg, keys, req.sel)
	if i := interrupted(ctx); i != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v while planning; nothing was run.\n", i)
		return out, exitError
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	out.plan = planned
	// Before anything runs: a delivery no grant allows is refused with nothing written.
	if !refuseUngranted(env, "apply", planned, grants, dir) {
		return out, exitError
	}
	// A saved plan is current (the caller checked it, for the same graph) and is its own
	// approval.
	if req.ask {
		planned.WriteText(env.stdout)
		ok := approve(ctx, env)
		if i := interrupted(ctx); i != nil {
			fmt.Fprintf(env.stderr, "\nfoundry apply: %v before the plan was approved; nothing was run.\n", i)
			return out, exitError
		}
		if !ok {
			fmt.Fprintln(env.stderr, "Apply cancelled.")
			return out, exitError
		}
	}
	if planned.Summary.Missing > 0 {
		fmt.Fprintf(env.stderr, "foundry apply: %d node(s) are missing and will not run; see 'foundry plan'.\n", planned.Summary.Missing)
	}
	signer, err := projectSigner(env, ws, req.signingKey)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	emit, done, err := req.events()
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitUsage
	}
	exe, err := req.ex.open(env)
	if err != nil {
		done()
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	opt := run.Options{
		Executor: exe, Parallelism: req.parallelism, Events: emit, Args: os.Args, Faults: faultsFromEnv(env),
		Signer: signer, Version: version, Registry: reg, TrustedKeys: keys, Rebuild: req.rebuild,
	}
	if req.engine != nil {
		// Shared records are taken when signed by a trusted key, this apply's own included.
		trusted := keys
		if own, err := signer.Verifier("this apply's signing key"); err == nil {
			trusted = append(append([]*provenance.Verifier(nil), keys...), own)
		}
		steps, shared, err := req.engine.steps(env, ws, reg, trusted, signer.KeyID(), dir)
		if err != nil {
			done()
			exe.Close()
			fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
			return out, exitError
		}
		if steps != nil {
			opt.Steps, opt.Shared = steps, shared
			defer steps.Close()
		}
	}
	res, err := run.Apply(ctx, ws, g, planned, opt)
	done()
	out.result = res
	// Close waits until the executor has removed every container it made, the ones killed
	// by an interruption included.
	closeErr := exe.Close()
	if i := interrupted(ctx); i != nil {
		return out, reportInterrupted(env, i, res, closeErr)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	for _, rj := range res.Rejections {
		fmt.Fprintf(env.stderr, "\nRejected candidate (a later candidate was admitted instead):\n%s\n", rj.String())
	}
	for _, f := range res.Failed {
		failureReport(env.stderr, f)
	}
	for _, d := range res.Delivered {
		fmt.Fprintf(env.stdout, "Delivered %s to %s.\n", d.Product, d.Location)
	}
	// Failed nodes are counted from the run's rows, as status counts them.
	rows, err := ws.State.Nodes(context.WithoutCancel(ctx), res.RunID)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v\n", err)
		return out, exitError
	}
	failed := state.CountNodes(rows)[state.NodeFailed]
	fetched := ""
	if res.Fetched > 0 {
		fetched = fmt.Sprintf("%d fetched, ", res.Fetched)
	}
	fmt.Fprintf(env.stdout, "Apply %s: %s%d executed, %d cached, %d failed, %d skipped in %s.\n",
		map[bool]string{true: "complete", false: "failed"}[len(res.Failed) == 0 && planned.Summary.Missing == 0],
		fetched, res.Executed, res.Cached, failed, len(res.Skipped), res.Elapsed.Round(1e6))
	if len(res.Failed) > 0 {
		return out, exitError
	}
	if planned.Summary.Missing > 0 {
		fmt.Fprintf(env.stderr, "foundry apply: %d node(s) could not be produced (missing); see 'foundry plan'.\n", planned.Summary.Missing)
		return out, exitError
	}
	return out, exitOK
}

// errLockTimeout ends a wait for the apply lock that ran out of -lock-timeout.
var errLockTimeout = errors.New("the lock timeout passed")

// lockWaiting is what a command tells its user, once, when it has to wait for the project's
// apply lock.
func lockWaiting(env *cliEnv, cmd string) func(workspace.Holder) {
	return func(h workspace.Holder) {
		since := ""
		if !h.Since.IsZero() {
			since = ", since " + h.Since.Local().Format("15:04:05")
		}
		fmt.Fprintf(env.stderr, "foundry %s: waiting for another apply of this project to finish (%s%s)…\n", cmd, holderPID(h), since)
	}
}

// holderPID names the lock's holder by the pid it recorded.
func holderPID(h workspace.Holder) string {
	if h.PID == 0 {
		return "pid unknown"
	}
	return "pid " + strconv.Itoa(h.PID)
}

// approve asks on a terminal; anywhere else it refuses, so that a script never applies by
// accident. An interruption while it waits for the answer refuses.
func approve(ctx context.Context, env *cliEnv) bool {
	f, ok := env.stdin.(*os.File)
	if !ok || !isTerminal(f) {
		fmt.Fprintln(env.stderr, "foundry apply: not a terminal, so not asking; use -auto-approve or apply a saved plan.")
		return false
	}
	fmt.Fprint(env.stdout, "\nRun this plan? Only 'yes' is accepted: ")
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(env.stdin).ReadString('\n')
		answer <- line
	}()
	select {
	case line := <-answer:
		return strings.TrimSpace(line) == "yes"
	case <-ctx.Done():
		return false
	}
}

// reportInterrupted tells what an interrupted apply did and how to resume it. By the time it
// is called the executor is closed: the steps that were running are gone, or closeErr says
// what could not be removed.
func reportInterrupted(env *cliEnv, i *interruption, res *run.Result, closeErr error) int {
	if res != nil {
		for _, f := range res.Failed {
			failureReport(env.stderr, f)
		}
		fmt.Fprintf(env.stdout, "Apply interrupted: %d executed, %d cached, %d failed, %d skipped in %s.\n",
			res.Executed, res.Cached, len(res.Failed), len(res.Skipped), res.Elapsed.Round(1e6))
	}
	if closeErr != nil {
		fmt.Fprintf(env.stderr, "foundry apply: %v: the running steps were stopped, but removing them failed: %v\n", i, closeErr)
		return exitError
	}
	fmt.Fprintf(env.stderr, "foundry apply: %v: the running steps were stopped and removed; finished steps are cached. Run 'foundry apply' again to resume.\n", i)
	return exitError
}

// faultsFromEnv reads FOUNDRY_TEST_FAULT=POINT[:NODE][#N], a test hook that kills this
// process with SIGKILL the Nth time (default the first) it reaches the named fault point
// (for NODE), to prove that apply is crash-safe there.
func faultsFromEnv(env *cliEnv) run.FaultInjector {
	spec := env.getenv("FOUNDRY_TEST_FAULT")
	if spec == "" {
		return nil
	}
	spec, nth, _ := strings.Cut(spec, "#")
	want, err := strconv.Atoi(nth)
	if err != nil || want < 1 {
		want = 1
	}
	point, node, _ := strings.Cut(spec, ":")
	var mu sync.Mutex
	seen := 0
	return func(p, n string) {
		if p != point || (node != "" && node != n) {
			return
		}
		mu.Lock()
		seen++
		kill := seen == want
		mu.Unlock()
		if kill {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not deliverable to ourselves late; wait for it
		}
	}
}

// projectSigner loads the signing key: the flag, else $FOUNDRY_SIGNING_KEY, else the
// project's own key under .foundry/keys, generated (ECDSA P-256) the first time. The key is
// never read from recipe files and never mounted into a step (dir() refuses .foundry).
func projectSigner(env *cliEnv, ws *workspace.Workspace, flagValue string) (*provenance.Signer, error) {
	if p := provenance.SigningKeyPath(flagValue, env.getenv); p != "" {
		return provenance.LoadSigner(p)
	}
	dir := filepath.Join(ws.Dir, "keys")
	key := filepath.Join(dir, "signing.key")
	if !fileExists(key) {
		priv, pub, err := provenance.GenerateKey(provenance.KeyECDSAP256)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "signing.pub"), pub, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(key, priv, 0o600); err != nil {
			return nil, err
		}
		fmt.Fprintf(env.stderr, "Generated this project's signing key %s; auditors verify with %s.\n"+
			"For a key of your own, use -signing-key or FOUNDRY_SIGNING_KEY ('foundry keygen' makes one).\n", key, filepath.Join(dir, "signing.pub"))
	}
	return provenance.LoadSigner(key)
}
