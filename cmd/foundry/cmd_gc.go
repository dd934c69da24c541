package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graphcache"
	"github.com/foundry-build/foundry/engine/volume"
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
				var roots []digest.Digest
				err = ws.State.EachActionRecord(context.Background(), func(_ digest.Digest, rec []byte) error {
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
					fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
					return exitError
				}
				stats, err := ws.Store.GC(roots, store.GCOptions{MinAge: *minAge, DryRun: *dry})
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
					return exitError
				}
				pruned := 0
				if *keepRuns >= 0 {
					if pruned, err = ws.State.PruneRuns(context.Background(), *keepRuns, *dry); err != nil {
						fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
						return exitError
					}
				}
				graphs, graphBytes, err := graphcache.Prune(filepath.Join(ws.Dir, "graph-cache"), *keepGraphs, *dry)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry gc: %v\n", err)
					return exitError
				}
				caches := &volume.PruneResult{}
				if *cacheMaxSize > 0 || *cacheMaxAge > 0 {
					if caches, err = ws.Volumes.Prune(volume.PruneOptions{MaxBytes: *cacheMaxSize, OlderThan: *cacheMaxAge, DryRun: *dry}); err != nil {
						fmt.Fprintf(env.stderr, "foundry gc: cache volumes: %v\n", err)
						return exitError
					}
				}
				inputs := filepath.Join(ws.Dir, "inputs")
				if !*dry {
					// Materialized inputs are copies of blobs: always safe to drop under the lock.
					os.RemoveAll(inputs)
					os.MkdirAll(inputs, 0o755)
				}
				if *jsonOut {
					writeJSON(env.stdout, struct {
						store.GCStats
						RunsPruned   int
						GraphsPruned int
						CachesPruned int
						CacheBytes   int64
						CachesBusy   int
					}{stats, pruned, graphs, len(caches.Removed), caches.Freed, len(caches.Busy)})
					return exitOK
				}
				verb := "Deleted"
				if *dry {
					verb = "Would delete"
				}
				fmt.Fprintf(env.stdout, "%s %d blob(s), %.1f MiB; kept %d live, spared %d younger than %s.\n",
					verb, stats.Deleted, float64(stats.BytesFreed)/(1<<20), stats.Live, stats.Spared, *minAge)
				if *keepRuns >= 0 {
					fmt.Fprintf(env.stdout, "%s the records of %d run(s) older than the newest %d.\n", verb, pruned, *keepRuns)
				}
				fmt.Fprintf(env.stdout, "%s %d compiled graph(s) (%.1f MiB) beyond the %d most recently used.\n", verb, graphs, float64(graphBytes)/(1<<20), *keepGraphs)
				fmt.Fprintf(env.stdout, "%s %d cache volume(s) (%.1f MiB); kept %d in use.\n", verb, len(caches.Removed), float64(caches.Freed)/(1<<20), len(caches.Busy))
				return exitOK
			}
		},
	})
}
