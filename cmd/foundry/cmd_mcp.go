package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/foundry-build/foundry/provenance"
)

func init() {
	register(&command{
		name:    "mcp",
		summary: "Serve the project to an LLM host as Model Context Protocol tools (stdio or HTTP)",
		usage:   "foundry mcp [-C DIR] [-allow apply,propose] [-trust-key PEM]... [-http ADDR [-token-issuer ISSUER=PEM]...] [options]\n       foundry mcp token -key KEY -audience URL -scope LIST [-expires DURATION] [-issuer NAME] [-subject NAME]",
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

Over HTTP (-http HOST:PORT): the Streamable HTTP transport at /mcp, the same tools, with
sessions (Mcp-Session-Id; at most -max-sessions open, each closed after -session-idle
without a request), resumable streams (a host that reconnects with Last-Event-ID gets
what it missed), every request of a session carrying MCP-Protocol-Version, bodies of at
most 16 MiB holding one JSON-RPC message, and a request whose Origin is not the server's
own (or an -allow-origin) refused. Plain HTTP is served on a loopback address only, unless
-allow-remote; -tls-cert and -tls-key serve HTTPS.

Authorization (-token-issuer ISSUER=PEM, repeatable): every request must carry a bearer
token (a JWT signed ES256 or EdDSA by a key of a trusted issuer, for this server's
resource URI (-resource, default the /mcp URL it listens on), not expired), else 401 with
WWW-Authenticate naming the protected resource metadata at
/.well-known/oauth-protected-resource. Its scopes say what it may do: read (the read-only
tools), call:NAME or call:* (a capability), apply, propose:JOB or propose:*; a call
outside them is 403 insufficient_scope and nothing runs. 'foundry mcp token' mints one,
signed by the operator's key (foundry keygen), printed on stdout. Tokens are never passed
to a tool, a step, a capability or a log.

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
  foundry keygen -out ops
  foundry mcp -C . -http 127.0.0.1:8765 -token-issuer ops=ops.pub
  foundry mcp token -key ops.key -issuer ops -audience http://127.0.0.1:8765/mcp \
      -scope read,call:int-sort -expires 1h

A host's configuration (for example Claude Desktop's mcpServers):
  {"command": "foundry", "args": ["mcp", "-C", "/path/to/project"]}

Exit codes: 0 when the client closed the session (stdio) or on SIGINT/SIGTERM (HTTP), 1 when
the server failed, 2 usage error.`,
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
			var hc mcpHTTPConfig
			fs.StringVar(&hc.addr, "http", "", "serve Streamable HTTP at `HOST:PORT`/mcp instead of stdio")
			fs.BoolVar(&hc.allowPlain, "allow-remote", false, "with -http: serve plain HTTP on an address that is not loopback")
			fs.StringVar(&hc.tlsCert, "tls-cert", "", "with -http: serve HTTPS with this certificate `PEM`")
			fs.StringVar(&hc.tlsKey, "tls-key", "", "with -http: the TLS certificate's private key `PEM`")
			fs.Var(&hc.origins, "allow-origin", "with -http: also accept requests from this browser `ORIGIN` (repeatable)")
			fs.IntVar(&hc.sessions, "max-sessions", 16, "with -http: at most `N` sessions open at once")
			fs.DurationVar(&hc.idle, "session-idle", 30*time.Minute, "with -http: close a session after this `DURATION` without a request")
			fs.StringVar(&hc.resource, "resource", "", "with -http: this server's resource `URL`, the audience tokens must name (default the /mcp URL it listens on)")
			var issuers stringList
			fs.Var(&issuers, "token-issuer", "with -http: require bearer tokens; trust those of `ISSUER=PEM` signed by the public key(s) in PEM (repeatable)")
			return func(env *cliEnv, args []string) int {
				cfg.grants = *grants
				if len(args) > 0 && args[0] == "token" {
					return mcpToken(env, args[1:])
				}
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
				if hc.addr == "" && (len(issuers) > 0 || hc.allowPlain || hc.tlsCert != "" || len(hc.origins) > 0 || hc.resource != "") {
					return usageError(env, "mcp", "-token-issuer, -allow-remote, -tls-cert, -allow-origin and -resource go with -http")
				}
				if hc.addr != "" {
					if err := checkHTTPConfig(&hc); err != nil {
						return usageError(env, "mcp", "%v", err)
					}
					if hc.auth, err = parseTokenIssuers(issuers); err != nil {
						return usageError(env, "mcp", "%v", err)
					}
				}
				cfg.env = env
				srv, err := newMCPServer(&cfg)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry mcp: %v\n", err)
					return exitError
				}
				defer srv.Close()
				if hc.addr != "" {
					ctx, stop := serveContext()
					defer stop()
					if err := srv.serveHTTP(ctx, &hc); err != nil {
						fmt.Fprintf(env.stderr, "foundry mcp: %v\n", err)
						return exitError
					}
					return exitOK
				}
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

// mcpToken is 'foundry mcp token': it mints a bearer token for foundry mcp -http, signed by
// the operator's private key, and prints it on stdout (nothing else).
func mcpToken(env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("mcp token", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	key := fs.String("key", "", "the operator's private key `FILE` (foundry keygen's PREFIX.key)")
	issuer := fs.String("issuer", "foundry", "the token's issuer `NAME`: the server trusts it with -token-issuer NAME=PREFIX.pub")
	subject := fs.String("subject", "operator", "whom the token is for (`NAME`); a session is bound to its issuer and subject")
	audience := fs.String("audience", "", "the server's resource `URL` (foundry mcp prints it: http://HOST:PORT/mcp)")
	expires := fs.Duration("expires", time.Hour, "the token is valid for this `DURATION`")
	var scopes stringList
	fs.Var(&scopes, "scope", "what the token grants: a comma-separated `LIST` of read, apply, call:NAME, call:*, propose:JOB, propose:* (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageError(env, "mcp", "token: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var list []string
	for _, l := range scopes {
		for _, s := range strings.Split(l, ",") {
			if s = strings.TrimSpace(s); s != "" {
				list = append(list, s)
			}
		}
	}
	if err := checkScopes(list); err != nil {
		return usageError(env, "mcp", "token: %v", err)
	}
	if *key == "" || *audience == "" {
		return usageError(env, "mcp", "token: -key and -audience are required")
	}
	if u, err := url.Parse(*audience); err != nil || u.Scheme == "" || u.Host == "" {
		return usageError(env, "mcp", "token: -audience %q: want the server's URL, http(s)://HOST:PORT/mcp", *audience)
	}
	if *expires <= 0 {
		return usageError(env, "mcp", "token: -expires must be positive")
	}
	k, err := provenance.LoadPrivateKey(*key)
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry mcp token: %v\n", err)
		return exitError
	}
	tok, err := mintToken(k, *issuer, *subject, *audience, list, *expires, time.Now())
	if err != nil {
		fmt.Fprintf(env.stderr, "foundry mcp token: %v\n", err)
		return exitError
	}
	fmt.Fprintln(env.stdout, tok)
	return exitOK
}
