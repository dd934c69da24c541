package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graphcache"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/volume"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/store"
)

func init() {
	register(&command{
		name:    "gc",
		summary: "Delete stored blobs that no cached result needs, and old run records",
		usage:   "foundry gc [options] [DIR]",
		help: `
Gc deletes every blob in the project's content store that no action cache record refers
to (outputs, logs, definitions, attestations), and the materialized copies of inputs under
.foundry/inputs. Cached results stay usable: a blob a record needs is never deleted. Blobs
younger than -min-age are spared, so a concurrent apply's fresh blobs survive. Gc holds the
project's apply lock while it works: while an apply holds it, gc says so and waits.

It also deletes the records of all but the newest -keep-runs runs (their nodes and
attempts, as 'foundry status' shows them). Runs still running and runs that carried out
effects are kept: the effects outbox is what stops a publish from being repeated. And it
keeps the -keep-graphs most recently used compiled graphs of .foundry/graph-cache (each
combination of configuration files and variables has its own), deleting the others.

And it bounds the project's cache volumes (spec/language.md §9b): those not used for longer
than -cache-max-age are deleted, then the least recently used until the rest fit in
-cache-max-size. A volume a step is using is kept. 'foundry cache' lists and prunes them.

Examples:
  foundry gc -dry-run
  foundry gc -min-age 0
  foundry gc -keep-runs 10
  foundry gc -keep-graphs 4
  foundry gc -cache-max-size 2000000000 -cache-max-age 72h

Exit codes: 0 success, 1 failure, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			dry := fs.Bool("dry-run", false, "report what would be deleted, delete nothing")
			minAge := fs.Duration("min-age", time.Hour, "spare blobs modified less than `AGE` ago")
			keepRuns := fs.Int("keep-runs", 100, "keep the records of the newest `N` runs; -1 keeps all")
			keepGraphs := fs.Int("keep-graphs", 16, "keep the `N` most recently used compiled graphs of the graph cache")
			cacheMaxSize := fs.Int64("cache-max-size", 10<<30, "keep the cache volumes within `BYTES`, deleting the least recently used; 0: no bound")
			cacheMaxAge := fs.Duration("cache-max-age", 30*24*time.Hour, "delete cache volumes not used for `AGE`; 0: no bound")
			jsonOut := fs.Bool("json", false, "print JSON")
			return func(env *cliEnv, args []string) int {
				if *cacheMaxSize < 0 || *cacheMaxAge < 0 {
					fmt.Fprintln(env.stderr, "foundry gc: -cache-max-size and -cache-max-age must be 0 (no bound) or more")
					return exitUsage
				}
				if *keepRuns < -1 {
					fmt.Fprintln(env.stderr, "foundry gc: -keep-runs must be -1 (keep all) or more")
					return exitUsage
				}
				if *keepGraphs < 0 {
					fmt.Fprintln(env.stderr, "foundry gc: -keep-graphs must be 0 or more")
					return exitUsage
				}
				dir, ok := projectDir(env, "gc", args)
				if !ok {
					return exitUsage
				}
				ws, ok := openExistingWorkspace(env, "gc", dir)
				if !ok {
					return exitError
				}
				defer ws.Close()
				// An apply (or gc) holding the lock is waited for: gc must not delete what it
				// is caching, and it has no reason to give up.
				unlock, err := ws.LockContext(context.Background(), lockWaiting(env, "gc"))
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
					return exitError
				}
				defer unlock()
				opt := gcOptions{DryRun: *dry, MinAge: *minAge, KeepRuns: *keepRuns, KeepGraphs: *keepGraphs, CacheMaxSize: *cacheMaxSize, CacheMaxAge: *cacheMaxAge}
				res, err := collectGarbage(context.Background(), ws, opt)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
					return exitError
				}
				if *jsonOut {
					writeJSON(env.stdout, struct {
						store.GCStats
						RunsPruned   int
						GraphsPruned int
						CachesPruned int
						CacheBytes   int64
						CachesBusy   int
					}{res.GCStats, res.RunsPruned, res.GraphsPruned, len(res.Caches.Removed), res.Caches.Freed, len(res.Caches.Busy)})
					return exitOK
				}
				verb := "Deleted"
				if opt.DryRun {
					verb = "Would delete"
				}
				fmt.Fprintf(env.stdout, "%s %d blob(s), %.1f MiB; kept %d live, spared %d younger than %s.\n",
					verb, res.Deleted, float64(res.BytesFreed)/(1<<20), res.Live, res.Spared, opt.MinAge)
				if opt.KeepRuns >= 0 {
					fmt.Fprintf(env.stdout, "%s the records of %d run(s) older than the newest %d.\n", verb, res.RunsPruned, opt.KeepRuns)
				}
				fmt.Fprintf(env.stdout, "%s %d compiled graph(s) (%.1f MiB) beyond the %d most recently used.\n", verb, res.GraphsPruned, float64(res.GraphBytes)/(1<<20), opt.KeepGraphs)
				fmt.Fprintf(env.stdout, "%s %d cache volume(s) (%.1f MiB); kept %d in use.\n", verb, len(res.Caches.Removed), float64(res.Caches.Freed)/(1<<20), len(res.Caches.Busy))
				return exitOK
			}
		},
	})
}

// gcOptions are what `foundry gc` reads from its flags.
type gcOptions struct {
	DryRun     bool          // report, delete nothing
	MinAge     time.Duration // spare unreachable blobs younger than this
	KeepRuns   int           // the newest runs whose records are kept; -1 keeps all
	KeepGraphs int           // the most recently used compiled graphs kept
	// The cache volumes are kept within CacheMaxSize bytes and CacheMaxAge of their last
	// use; 0 is no bound.
	CacheMaxSize int64
	CacheMaxAge  time.Duration
}

// gcResult is what collectGarbage deleted, or would delete in a dry run.
type gcResult struct {
	store.GCStats
	RunsPruned   int
	GraphsPruned int
	GraphBytes   int64
	Caches       *volume.PruneResult
}

// collectGarbage is the core of `foundry gc` on ws, whose lock the caller holds: the
// blobs no action cache record refers to, the records of old runs, the compiled graphs
// beyond opt.KeepGraphs and the materialized inputs.
func collectGarbage(ctx context.Context, ws *workspace.Workspace, opt gcOptions) (gcResult, error) {
	res := gcResult{Caches: &volume.PruneResult{}}
	var roots []digest.Digest
	err := ws.State.EachActionRecord(ctx, func(_ digest.Digest, rec []byte) error {
		var r cache.Result
		if err := json.Unmarshal(rec, &r); err != nil {
			return nil // an unreadable record protects nothing; lookups treat it as a miss
		}
		for _, o := range r.Outputs {
			roots = append(roots, o.Digest)
		}
		for _, d := range []digest.Digest{r.Definition, r.Stdout.Digest, r.Stderr.Digest} {
			if d != "" {
				roots = append(roots, d)
			}
		}
		roots = append(roots, r.Attestations...)
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.GCStats, err = ws.Store.GC(roots, store.GCOptions{MinAge: opt.MinAge, DryRun: opt.DryRun}); err != nil {
		return res, err
	}
	if opt.KeepRuns >= 0 {
		if res.RunsPruned, err = ws.State.PruneRuns(ctx, opt.KeepRuns, opt.DryRun); err != nil {
			return res, err
		}
		if !opt.DryRun {
			if err := pruneTraces(ctx, ws); err != nil {
				return res, err
			}
		}
	}
	if res.GraphsPruned, res.GraphBytes, err = graphcache.Prune(filepath.Join(ws.Dir, "graph-cache"), opt.KeepGraphs, opt.DryRun); err != nil {
		return res, err
	}
	if opt.CacheMaxSize > 0 || opt.CacheMaxAge > 0 {
		if res.Caches, err = ws.Volumes.Prune(volume.PruneOptions{MaxBytes: opt.CacheMaxSize, OlderThan: opt.CacheMaxAge, DryRun: opt.DryRun}); err != nil {
			return res, fmt.Errorf("cache volumes: %w", err)
		}
	}
	if !opt.DryRun {
		// Materialized inputs are copies of blobs: always safe to drop under the lock.
		inputs := filepath.Join(ws.Dir, "inputs")
		os.RemoveAll(inputs)
		os.MkdirAll(inputs, 0o755)
	}
	return res, nil
}

// pruneTraces removes the traces kept with runs the state database no longer has (a trace
// is kept with its run: spec/state.md).
func pruneTraces(ctx context.Context, ws *workspace.Workspace) error {
	events, _ := ws.TracePaths("x")
	dir := filepath.Dir(events)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, _, _ := strings.Cut(e.Name(), ".")
		if id == "" {
			continue
		}
		if _, err := ws.State.GetRun(ctx, id); errors.Is(err, state.ErrNotFound) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	return nil
}
