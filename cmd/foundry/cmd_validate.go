package main

import (
	"flag"
	"fmt"
)

func init() {
	register(&command{
		name:    "validate",
		summary: "Check the configuration: syntax, types, references, cycles",
		usage:   "foundry validate [options] [DIR]",
		help: `
Validate parses every *.hcl file in DIR (default: the current directory), evaluates it and
compiles the graph, reporting every problem with file:line:column and a source snippet.
It runs nothing and writes nothing. Input files are read and hashed, so a missing file
referenced by dir() or host_file() is an error here too.

Examples:
  foundry validate
  foundry validate -json examples/hello    # {"valid": bool, "diagnostics": [...]}

Exit codes: 0 valid, 1 invalid, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var v varFlags
			v.register(fs)
			jsonOut := fs.Bool("json", false, "print the result as JSON")
			return func(env *cliEnv, args []string) int {
				dir, ok := projectDir(env, "validate", args)
				if !ok {
					return exitUsage
				}
				g, diags := loadGraph(env, dir, &v, *jsonOut)
				if *jsonOut {
					writeJSON(env.stdout, map[string]any{"valid": g != nil, "diagnostics": toJSONDiagnostics(diags)})
				} else if g != nil {
					fmt.Fprintf(env.stdout, "The configuration is valid: %d nodes.\n", len(g.Nodes))
				}
				if g == nil {
					return exitError
				}
				return exitOK
			}
		},
	})
}
