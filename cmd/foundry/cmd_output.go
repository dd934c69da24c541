package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/foundry-build/foundry/engine/cache"
)

func init() {
	register(&command{
		name:    "output",
		summary: "Print or export a step's outputs from its last successful result",
		usage:   "foundry output [options] NODE [PATH]",
		help: `
Output lists the declared outputs of NODE's last successful result (path, kind, digest,
size). With PATH (one of them, e.g. /out/report.txt) it writes a file output to stdout, or
with -o DEST copies the output (file or directory) to DEST, which must not exist.

Examples:
  foundry output step.report
  foundry output step.report /out/report.txt
  foundry output -o ./dist recipe.int-sort-go.step.build /out/int-sort

Exit codes: 0 success, 1 no such node, output or result, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			dirFlag := fs.String("C", ".", "the project `DIR`")
			dest := fs.String("o", "", "copy the output to `DEST` instead of printing it")
			jsonOut := fs.Bool("json", false, "list outputs as JSON")
			return func(env *cliEnv, args []string) int {
				if len(args) < 1 || len(args) > 2 {
					fmt.Fprintln(env.stderr, "foundry output: want NODE [PATH]")
					return exitUsage
				}
				ws, ok := openExistingWorkspace(env, "output", *dirFlag)
				if !ok {
					return exitError
				}
				defer ws.Close()
				ctx := context.Background()
				n, found, err := ws.State.LastNodeResult(ctx, args[0])
				if err != nil || !found {
					fmt.Fprintf(env.stderr, "foundry output: %s has no result in this project%s\n", args[0], errSuffix(err))
					return exitError
				}
				rec, hit, err := ws.Cache.Lookup(ctx, n.Action)
				if err != nil || rec == nil || !hit {
					fmt.Fprintf(env.stderr, "foundry output: %s has no usable successful result (last status %s)%s\n", args[0], n.Status, errSuffix(err))
					return exitError
				}
				if len(args) == 1 {
					if *jsonOut {
						writeJSON(env.stdout, rec.Outputs)
						return exitOK
					}
					for _, o := range rec.Outputs {
						fmt.Fprintf(env.stdout, "%-40s %-4s %s %d bytes\n", o.Path, o.Kind, o.Digest, o.Size)
					}
					return exitOK
				}
				var out *cache.Output
				for i := range rec.Outputs {
					if rec.Outputs[i].Path == args[1] {
						out = &rec.Outputs[i]
					}
				}
				if out == nil {
					fmt.Fprintf(env.stderr, "foundry output: %s has no output %s\n", args[0], args[1])
					return exitError
				}
				if *dest != "" {
					if out.Kind == cache.Tree {
						err = ws.Store.Materialize(out.Digest, *dest)
					} else {
						var b []byte
						if b, err = ws.Store.Get(out.Digest); err == nil {
							os.MkdirAll(filepath.Dir(*dest), 0o755)
							err = os.WriteFile(*dest, b, os.FileMode(max(out.Mode, 0o644)))
						}
					}
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry output: %v\n", err)
						return exitError
					}
					return exitOK
				}
				if out.Kind == cache.Tree {
					fmt.Fprintf(env.stderr, "foundry output: %s is a directory; use -o DEST\n", args[1])
					return exitError
				}
				b, err := ws.Store.Get(out.Digest)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry output: %v\n", err)
					return exitError
				}
				env.stdout.Write(b)
				return exitOK
			}
		},
	})
}
