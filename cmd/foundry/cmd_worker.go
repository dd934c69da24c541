package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/temporal"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

var errNoTemporalAddress = errors.New("-engine temporal needs -temporal-address HOST:PORT (or $FOUNDRY_TEMPORAL_ADDRESS)")

// engineFlags select where apply runs steps: here (embedded) or on Temporal workers.
type engineFlags struct {
	name      string
	temporal  temporalFlags
	registry  string
	heartbeat time.Duration
}

// temporalFlags are the flags apply and worker share to reach Temporal.
type temporalFlags struct {
	address, namespace, queue string
}

func (t *temporalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.address, "temporal-address", "", "the Temporal frontend `HOST:PORT` (default $FOUNDRY_TEMPORAL_ADDRESS)")
	fs.StringVar(&t.namespace, "namespace", "default", "the Temporal `NAMESPACE`")
	fs.StringVar(&t.queue, "task-queue", temporal.DefaultTaskQueue, "the workflows' task `QUEUE`; steps go to QUEUE-OS-ARCH (foundry-linux-amd64)")
}

func (t *temporalFlags) addressOr(env *cliEnv) string {
	if t.address != "" {
		return t.address
	}
	return env.getenv("FOUNDRY_TEMPORAL_ADDRESS")
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.name, "engine", "embedded", "`ENGINE` that runs steps: embedded (this machine) or temporal (foundry worker processes, spec/temporal.md)")
	e.temporal.register(fs)
	fs.StringVar(&e.registry, "temporal-registry", "", "the registry `HOST[:PORT]/REPO` that carries content to and from workers (default: the project's registry, which must then be remote)")
	fs.DurationVar(&e.heartbeat, "heartbeat-timeout", temporal.DefaultHeartbeatTimeout, "with -engine temporal: how long a silent worker keeps a step before Temporal gives it to another")
}

// check reports a bad combination of flags before anything is opened or planned (a
// project's signing key is generated on its first apply).
func (e *engineFlags) check(env *cliEnv) error {
	switch e.name {
	case "embedded":
		return nil
	case "temporal":
		if e.temporal.addressOr(env) == "" {
			return errNoTemporalAddress
		}
		if e.heartbeat < time.Second {
			return fmt.Errorf("-heartbeat-timeout %s: want at least 1s", e.heartbeat)
		}
		return nil
	}
	return fmt.Errorf("unknown engine %q: use embedded or temporal", e.name)
}

// steps returns the executor of steps for -engine temporal and the action-cache records it
// shares through the registry (checked with keys), or nils for the embedded engine.
// projectReg is the project's registry, used to carry content unless -temporal-registry
// names another.
func (e *engineFlags) steps(env *cliEnv, ws *workspace.Workspace, projectReg registry.Store, keys []*provenance.Verifier, signer string, dir string) (*temporal.Executor, *temporal.Records, error) {
	if e.name != "temporal" {
		return nil, nil, nil
	}
	addr := e.temporal.addressOr(env)
	if addr == "" {
		return nil, nil, errNoTemporalAddress
	}
	reg := projectReg
	if e.registry != "" {
		var err error
		if reg, err = registry.Open(e.registry); err != nil {
			return nil, nil, fmt.Errorf("-temporal-registry: %w", err)
		}
	}
	if reg == nil || strings.HasPrefix(reg.String(), registry.LayoutScheme) {
		where := "the project's registry is a local directory"
		if reg != nil {
			where = fmt.Sprintf("the project's registry %s is a local directory", reg)
		}
		return nil, nil, fmt.Errorf("-engine temporal carries content through a registry every worker can reach, and %s: set project.registry to HOST[:PORT]/REPO or give -temporal-registry", where)
	}
	steps, err := temporal.New(temporal.Options{
		Address: addr, Namespace: e.temporal.namespace, TaskQueue: e.temporal.queue,
		Registry: reg, Store: ws.Store, Project: dir, HeartbeatTimeout: e.heartbeat,
		MaxHistory: maxHistoryFromEnv(env),
		Log:        func(format string, args ...any) { fmt.Fprintf(env.stderr, "foundry apply: "+format+"\n", args...) },
	})
	if err != nil {
		return nil, nil, err
	}
	return steps, &temporal.Records{Registry: reg, WS: ws, Keys: keys, Signer: signer}, nil
}

// maxHistoryFromEnv lets tests split a small graph's workflow (FOUNDRY_TEMPORAL_MAX_HISTORY):
// the real threshold needs a thousand steps.
func maxHistoryFromEnv(env *cliEnv) int {
	var n int
	fmt.Sscan(env.getenv("FOUNDRY_TEMPORAL_MAX_HISTORY"), &n)
	return n
}

func init() {
	register(&command{
		name:    "worker",
		summary: "Run applies' steps for Temporal (apply -engine temporal)",
		usage:   "foundry worker -temporal-address HOST:PORT [options]",
		help: `
Worker serves 'foundry apply -engine temporal' on a Temporal cluster: it runs the applies'
workflows from the task queue (-task-queue, default foundry) and their steps from the queue
of this machine's platform (foundry-linux-amd64), in its local sandboxed executor (containerd
or runc; never unsandboxed). Any number of workers on any number of machines can serve one
queue; Temporal gives each step to one of them, and to another if that one dies or goes
silent past the apply's -heartbeat-timeout.

A step's image and inputs come from the registry the apply names, by digest, and every blob is
checked against its digest before a step sees it; the step's /out and logs go back the same
way. A worker needs no project, key or state database: it keeps fetched content, unpacked
images and inputs under -dir, which only one worker may use at a time. It never sees sealed
cases, signing keys or registry credentials beyond its own Docker config: evaluations, signing
and publishing stay with the apply.

SIGINT or SIGTERM stops the worker: the steps it was running are stopped, and Temporal gives
them to another worker. A worker started again on the same -dir removes what a killed one
left behind.

Examples:
  foundry worker -temporal-address temporal.example:7233
  foundry worker -temporal-address 127.0.0.1:7233 -executor runc -parallelism 8 -dir /var/lib/foundry-worker

Exit codes: 0 stopped by a signal, 1 could not start or lost its executor, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var tf temporalFlags
			tf.register(fs)
			var ex executorFlags
			ex.register(fs)
			par := fs.Int("parallelism", 4, "run at most `N` steps at once")
			dir := fs.String("dir", "", "the worker's own content store, inputs and images `DIR` (default $XDG_CACHE_HOME/foundry-worker, else ~/.cache/foundry-worker)")
			identity := fs.String("identity", "", "the `NAME` this worker gives Temporal and records in provenance (default HOST:PID)")
			return func(env *cliEnv, args []string) int {
				if len(args) > 0 {
					return usageError(env, "worker", "worker takes no arguments, only flags")
				}
				addr := tf.addressOr(env)
				if addr == "" {
					return usageError(env, "worker", "-temporal-address HOST:PORT is required (or $FOUNDRY_TEMPORAL_ADDRESS)")
				}
				if *par < 1 {
					return usageError(env, "worker", "-parallelism must be at least 1")
				}
				if ex.name == "local" {
					return usageError(env, "worker", "a worker runs steps in a sandbox: use -executor containerd, runc or auto")
				}
				d := *dir
				if d == "" {
					cache, err := os.UserCacheDir()
					if err != nil {
						return usageError(env, "worker", "no -dir given and no cache directory: %v", err)
					}
					d = filepath.Join(cache, "foundry-worker")
				}
				id := *identity
				if id == "" {
					host, _ := os.Hostname()
					id = fmt.Sprintf("%s:%d", host, os.Getpid())
				}
				return runWorker(env, tf, &ex, d, id, *par)
			}
		},
	})
}

func runWorker(env *cliEnv, tf temporalFlags, ex *executorFlags, dir, id string, par int) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(env.stderr, "foundry worker: "+format+"\n", args...)
		return exitError
	}
	// The worker's directory is a workspace of no project: it holds a content store,
	// materialized inputs and seed images, and a lock so that one worker uses it at a time.
	ws, err := workspace.Open(dir)
	if err != nil {
		return fail("%v", err)
	}
	defer ws.Close()
	unlock, err := ws.Lock()
	if err != nil {
		return fail("%s is in use by another worker: give each worker its own -dir", dir)
	}
	defer unlock()
	lazy, err := ex.open(env)
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := notifyInterrupt(context.Background())
	defer stop()
	exe, err := lazy.(executors.Opener).Open(ctx)
	if err != nil {
		return fail("%v", err)
	}
	defer exe.Close()
	acts := &temporal.Activities{Executor: exe, WS: ws, Identity: id, Log: func(format string, args ...any) {
		fmt.Fprintf(env.stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}}
	fmt.Fprintf(env.stderr, "foundry worker %s: serving %s on %s (namespace %s), steps from %s with %s, %d at once\n",
		id, tf.queue, tf.addressOr(env), tf.namespace, temporal.ActivityQueue(tf.queue, temporal.Platform()), exe.Name(), par)
	err = temporal.RunWorker(ctx, temporal.WorkerOptions{
		Address: tf.addressOr(env), Namespace: tf.namespace, TaskQueue: tf.queue, Parallelism: par, Activities: acts,
	})
	if err != nil {
		return fail("%v", err)
	}
	if i := interrupted(ctx); i != nil {
		fmt.Fprintf(env.stderr, "foundry worker: %v: stopped\n", i)
	}
	return exitOK
}

// defaultTemporalParallelism is apply's -parallelism with -engine temporal when not given:
// the workers' own parallelism bounds what runs; the apply only keeps them fed.
const defaultTemporalParallelism = 64

// flagGiven reports whether the flag was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
