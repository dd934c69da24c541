package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/invoke"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
)

// serveGrace is how long a stopping serve lets calls in flight finish before it kills their
// sandboxes.
const serveGrace = 10 * time.Second

func init() {
	register(&command{
		name:    "serve",
		summary: "Serve the project's admitted capabilities over HTTP, with an OpenAPI 3.1 document",
		usage:   "foundry serve [-addr HOST:PORT] [-C DIR] [-trust-key PEM]... [-executor NAME] [-allow-remote]",
		help: `
Serve makes every admitted capability of the project at -C callable over HTTP, one operation
each, without rebuilding it: the version the registry holds under the capability's contract,
with evidence that verifies with the trusted keys (what 'foundry capabilities' shows as
"evidence verified"), pinned by digest. A capability without one is not served (run
'foundry apply' first).

  POST /capabilities/NAME   the request body is the capability's input, the JSON value its
                            contract's input schema describes (for int-sort, [3,1,2]); the
                            response body is its output ([1,2,3])
  GET  /openapi.json        an OpenAPI 3.1 document generated from the contracts: one
                            operation per capability (operationId NAME), its input and output
                            schemas exactly as the contract stores them (JSON Schema 2020-12)

Each call validates the input in full against the input schema, runs the capability once in
a fresh sandbox through its declared interface (input on stdin, output on stdout, no
network, 512 MiB, 1 CPU, 60 s: the limits it was evaluated under), and validates the output
against the output schema. Numbers pass through exactly as written (9223372036854775807,
3.0). The status says who is at fault:

  200  the output
  400  the input is not JSON (at which byte, and what) or violates the input schema;
       nothing ran (the validator's message is in "detail")
  422  the capability exited with a declared error: {"error": NAME, "exit_code": N,
       "stderr": the end of its stderr}
  403  the version is quarantined ('foundry quarantine'); 404 no such capability;
       413 input over 16 MiB or over 262144 JSON values (refused before it is decoded)
  502  the capability broke its contract: output that is not JSON or violates the output
       schema, an undeclared exit code, killed at the deadline or the memory limit
  500  it could not be run (registry, sandbox, executor); 503 serve is stopping, or busy:
       inputs in flight hold the memory this one needs (Retry-After: 1)

What inputs may hold in memory is bounded: bodies being read or waiting to run share
64 MiB (each counted twice, for the copy the capability reads), inputs being decoded and
validated 192 MiB (twice their size and 512 bytes per JSON value); a call that finds no
room within 10 s is answered 503. A body must arrive within 60 s.

Every status but 200 and 422 answers an RFC 9457 problem (application/problem+json:
type, title, status, detail), so a domain error is never mistaken for a failure to call.

Only cli capabilities are served; a service capability is listed as not served. The
capability runs on the files its artifact holds, not on its recipe's base image (the
registry does not hold that), so an entrypoint that needs its base's files fails to start.

Serve prints the address it listens on to stderr (port 0 picks a free one) and stops on
SIGINT or SIGTERM, giving calls in flight 10 s before their sandboxes are killed. It speaks
plain HTTP without authentication, so it listens on loopback addresses only, unless
-allow-remote. Calls run only in a sandbox: -executor local is refused.

Examples:
  foundry serve -addr 127.0.0.1:8080
  curl -s -X POST --data '[3,1,2]' http://127.0.0.1:8080/capabilities/int-sort
  curl -s http://127.0.0.1:8080/openapi.json

Exit codes: 0 stopped by SIGINT/SIGTERM, 1 nothing to serve, configuration, registry or
listen errors, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			addr := fs.String("addr", "127.0.0.1:8080", "listen on `HOST:PORT`")
			project := fs.String("C", ".", "project `DIR`")
			var v varFlags
			v.register(fs)
			var trust stringList
			fs.Var(&trust, "trust-key", "also trust this public key `PEM` for admitted capabilities (repeatable; the project's own key is always trusted)")
			var ex executorFlags
			ex.register(fs)
			allowRemote := fs.Bool("allow-remote", false, "listen on a non-loopback address (plain HTTP, no authentication!)")
			return func(env *cliEnv, args []string) int {
				if len(args) > 0 {
					return usageError(env, "serve", "unexpected arguments: %s (the project is -C DIR)", strings.Join(args, " "))
				}
				if host, _, err := net.SplitHostPort(*addr); err != nil {
					return usageError(env, "serve", "-addr %q: %v", *addr, err)
				} else if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) && !*allowRemote {
					return usageError(env, "serve", "-addr %s is not a loopback address; serve has no authentication, so add -allow-remote to listen there", *addr)
				}
				exe, err := ex.open(env)
				if err != nil {
					return usageError(env, "serve", "%v", err)
				}
				if err := invoke.Sandboxed(exe); err != nil {
					return usageError(env, "serve", "%v", err)
				}
				defer exe.Close()
				return serveProject(env, serveOptions{Project: *project, Vars: &v, Trust: trust, Addr: *addr, Executor: exe})
			}
		},
	})
}

// reportServed says on stderr which capabilities are served and which are not (and why,
// in short), and returns those served: the cli capabilities with an admitted version.
func reportServed(env *cliEnv, g *graph.Graph, inv []invoke.Capability) []invoke.Capability {
	admitted := map[string]bool{}
	var served []invoke.Capability
	for _, c := range inv {
		admitted[c.Address] = true
		if c.Kind != "cli" {
			fmt.Fprintf(env.stderr, "foundry serve: %s not served: it is a %s capability, and only cli capabilities can be called yet\n", c.Address, c.Kind)
			continue
		}
		served = append(served, c)
		fmt.Fprintf(env.stderr, "foundry serve: POST /capabilities/%s  contract %s  admitted %s\n", c.Name, c.Contract.Short(), c.Ref)
	}
	for _, a := range g.Order {
		if n := g.Nodes[a]; n.Kind == graph.KindCapability && !admitted[a] {
			fmt.Fprintf(env.stderr, "foundry serve: %s not served: no admitted version whose evidence verifies\n", a)
		}
	}
	return served
}

func registryName(g *graph.Graph) string {
	if g.Config.Project.Registry != "" {
		return g.Config.Project.Registry
	}
	return defaultRegistry
}

// serveOptions are what `foundry serve` reads from its flags, checked: Addr is a loopback
// address unless the operator allowed another, and Executor is a sandbox.
type serveOptions struct {
	Project  string    // the project directory (-C)
	Vars     *varFlags // -var and -var-file
	Trust    []string  // more trusted public keys (-trust-key)
	Addr     string    // HOST:PORT to listen on
	Executor executors.Executor
}

// serveProject is the core of `foundry serve`: it serves the project's admitted cli
// capabilities on opt.Addr until serveContext's context is done (SIGINT, SIGTERM), then
// gives calls in flight serveGrace.
func serveProject(env *cliEnv, opt serveOptions) int {
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry serve: "+format+"\n", a...)
		return exitError
	}
	g, _ := loadGraph(env, opt.Project, opt.Vars, false)
	if g == nil {
		return exitError
	}
	reg, err := projectRegistry(g, false)
	if err != nil {
		return failed("%v", err)
	}
	nothing := func() int {
		return failed("nothing to serve: no capability of the project has an admitted cli version in %s whose evidence verifies (run 'foundry apply'; 'foundry capabilities' says why)", registryName(g))
	}
	if reg == nil {
		return nothing() // no registry yet; and nothing is written
	}
	keys, err := trustedKeys(opt.Project, opt.Trust)
	if err != nil {
		return failed("%v", err)
	}
	ws, err := workspace.Open(opt.Project)
	if err != nil {
		return failed("%v", err)
	}
	defer ws.Close()
	ctx, stop := serveContext()
	defer stop()
	inv, err := invoke.Inventory(ctx, ws, g, reg, keys)
	if err != nil {
		return failed("%v", err)
	}
	served := reportServed(env, g, inv)
	if len(served) == 0 {
		return nothing()
	}
	scratch, err := os.MkdirTemp("", "foundry-serve-")
	if err != nil {
		return failed("%v", err)
	}
	defer os.RemoveAll(scratch)
	iv := &invoke.Invoker{Workspace: ws, Registry: reg, Keys: keys, Scratch: scratch,
		Executor: func(ctx context.Context) (executors.Executor, error) {
			if o, ok := opt.Executor.(executors.Opener); ok {
				return o.Open(context.WithoutCancel(ctx))
			}
			return opt.Executor, nil
		}}
	h, err := newServeHandler(g.Config.Project.Name, served, iv.Run, log.New(env.stderr, "serve: ", log.LstdFlags))
	if err != nil {
		return failed("%v", err)
	}
	h.report = func(ctx context.Context, run string) (*runReport, error) { return runReportOf(ctx, ws, run, opt.Trust) }
	ln, err := net.Listen("tcp", opt.Addr)
	if err != nil {
		return failed("%v", err)
	}
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return calls }}
	fmt.Fprintf(env.stderr, "foundry serve: listening on http://%s (OpenAPI document: http://%s/openapi.json)\n", ln.Addr(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	serveStarted(ln.Addr().String())
	select {
	case err := <-errc:
		return failed("%v", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(env.stderr, "foundry serve: stopping")
	sctx, cancel := context.WithTimeout(context.Background(), serveGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		// Calls still running past the grace: their sandboxes are killed.
		cancelCalls()
		srv.Close()
	}
	h.wait()
	fmt.Fprintln(env.stderr, "foundry serve: stopped")
	return exitOK
}
