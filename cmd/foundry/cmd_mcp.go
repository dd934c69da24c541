package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func init() {
	register(&command{
		name:    "mcp",
		summary: "Serve the project to an LLM host as Model Context Protocol tools (stdio)",
		usage:   "foundry mcp [-C DIR] [-allow apply,propose] [-trust-key PEM]... [options]",
		help: `
Mcp runs a Model Context Protocol server (protocol 2025-11-25, also 2025-06-18) on standard
input and output for the project in DIR, so that an LLM host or coding agent can drive
Foundry through typed tool calls. Diagnostics go to standard error; standard output
carries only the protocol.

Tools (each project tool is the code of the command of its name):
  validate      is the configuration valid; its diagnostics
  plan          counts, and every step and capability with its status and reason
  status        the recent runs; the nodes and capability events of one
  explain       why a step runs or is cached (NODE)
  logs          the recorded output of a step's last execution (NODE), nothing else
  verify        the evidence chain of a capability's admitted version, or of a digest
                against the project's attestations, with the trusted keys
  capabilities  the project's capabilities by name: contract digest, admitted version,
                evidence status
  jobs          the reconstruction jobs, their budgets and spend, and the round that
                waits for a proposal
  job_brief     the brief of a job's waiting round (JOB): what a builder finds at /job,
                with earlier rounds' counterexamples; never a sealed case
  apply         only with -allow apply: plan and apply, auto-approved, under this
                command's settings (its executor, keys, -grants and variables)
  propose       only with -allow propose: send files as the proposal for a job's waiting
                round; the apply running it evaluates it, and admits it only on a sealed
                pass. Tool calls run one at a time, so the apply a proposal is for runs
                outside this server (the operator's 'foundry apply'): an apply tool call
                holds the server until its apply ends
  cap_NAME      one per admitted capability of the project (a verified, unquarantined
                version in its registry): call it once in a fresh sandbox with no
                network; its schemas are the contract's, lowered to the portable subset
                (a non-object input is the property "input", a non-object output
                "output"); input and output are validated in full against the contract

Every tool's input is a flat JSON object with no extra properties, validated in full by
the server; a call that fails validation returns a tool error (isError) saying why, and a
call of a tool that does not exist is a protocol error. Tools carry MCP annotations
(readOnlyHint, idempotentHint, destructiveHint, openWorldHint).

The boundary: the operator decides everything that is authority, here on the command line
and in the environment, never a tool argument. No tool creates or widens a grant, raises a
budget, marks a suite passed, admits or signs anything (apply admits only what passes its
sealed evaluation, as 'foundry apply' does), reads sealed cases, keys or the state database
as files, or names a capability outside the project. The project's variables (-var) are
the operator's too: a tool cannot set them. Text from the project (summaries, names,
diagnostics, logs) is returned as data in fields, never as the server's instructions.
See spec/mcp.md.

Examples:
  foundry mcp -C examples/int-sort
  foundry mcp -C . -allow apply -trust-key team.pub
  npx @modelcontextprotocol/inspector --cli --method tools/list -- foundry mcp -C examples/hello

A host's configuration (for example Claude Desktop's mcpServers):
  {"command": "foundry", "args": ["mcp", "-C", "/path/to/project"]}

Exit codes: 0 when the client closed the session, 1 when the server failed, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var cfg mcpConfig
			fs.StringVar(&cfg.dir, "C", ".", "the project `DIR`")
			var allow stringList
			fs.Var(&allow, "allow", "enable tools that change the project: a comma-separated `LIST` of apply, propose (repeatable)")
			fs.Var(&cfg.trust, "trust-key", "also trust this public key `PEM` for admitted capabilities (repeatable; the project's own key is always trusted)")
			cfg.vars.register(fs)
			cfg.ex.register(fs)
			fs.IntVar(&cfg.parallelism, "parallelism", 4, "apply runs at most `N` steps at once")
			fs.StringVar(&cfg.signingKey, "signing-key", "", "private key `FILE` apply signs provenance with (default $FOUNDRY_SIGNING_KEY, else the project's own)")
			grants := registerGrants(fs)
			return func(env *cliEnv, args []string) int {
				cfg.grants = *grants
				if len(args) > 0 {
					return usageError(env, "mcp", "unexpected arguments: %s (the project is -C DIR)", strings.Join(args, " "))
				}
				var err error
				if cfg.allow, err = parseAllow(allow); err != nil {
					return usageError(env, "mcp", "%v", err)
				}
				if cfg.parallelism < 1 {
					return usageError(env, "mcp", "-parallelism must be at least 1")
				}
				if st, err := os.Stat(cfg.dir); err != nil || !st.IsDir() {
					fmt.Fprintf(env.stderr, "foundry mcp: -C %s is not a directory\n", cfg.dir)
					return exitError
				}
				if cfg.dir, err = filepath.Abs(cfg.dir); err != nil {
					fmt.Fprintf(env.stderr, "foundry mcp: %v\n", err)
					return exitError
				}
				cfg.env = env
				srv, err := newMCPServer(&cfg)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry mcp: %v\n", err)
					return exitError
				}
				defer srv.Close()
				ctx, stop := notifyInterrupt(context.Background())
				defer stop()
				// The protocol's newline-delimited JSON-RPC on env's streams (os.Stdin and
				// os.Stdout when run as a command), each line checked (mcp_lines.go).
				t := &lineTransport{r: env.stdin, w: env.stdout}
				if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil {
					fmt.Fprintf(env.stderr, "foundry mcp: %v\n", err)
					return exitError
				}
				return exitOK
			}
		},
	})
}

// allowable are the -allow values: what the operator may enable beyond the read-only tools
// (apply; propose, which sends a proposal into a reconstruction job's waiting round).
var allowable = []string{"apply", "propose"}

// parseAllow reads the -allow lists: comma-separated, repeatable; an unknown value is an
// error that names the known ones.
func parseAllow(lists []string) (map[string]bool, error) {
	allow := map[string]bool{}
	for _, l := range lists {
		for _, v := range strings.Split(l, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			known := false
			for _, a := range allowable {
				known = known || a == v
			}
			if !known {
				return nil, fmt.Errorf("-allow %s: unknown; the tools that can be enabled are %s", v, strings.Join(allowable, ", "))
			}
			allow[v] = true
		}
	}
	return allow, nil
}

// allowList is allow as a sorted list, for messages.
func allowList(allow map[string]bool) []string {
	out := []string{}
	for a := range allow {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
