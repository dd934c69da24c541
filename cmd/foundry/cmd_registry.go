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
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/registry"
)

// Test hooks: the context serve runs under (cancelled on SIGINT/SIGTERM) and a callback
// with the address it listens on.
var (
	serveContext = func() (context.Context, context.CancelFunc) {
		return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	serveStarted = func(addr string) {}
)

func init() {
	register(&command{
		name:    "registry",
		summary: "Serve the project's embedded registry over the OCI distribution API",
		usage:   "foundry registry serve [-addr HOST:PORT] [-root PATH] [-repo NAME] [-allow-push] [-C DIR]",
		help: `
Registry serve makes the embedded registry (an OCI image layout on disk, by default
.foundry/registry in the project at -C) reachable by any OCI client — crane, oras, skopeo,
cosign, containerd, other Foundry machines — over the distribution API, with the OCI 1.1
referrers API. It is go-containerregistry's registry implementation backed by the layout:

  blobs      read from and written to the layout's blobs/ (digest checked, atomic rename)
  manifests  loaded from the layout at start; every manifest pushed is written to the
             layout (and its tag to index.json) before the client gets its 201
  deletes    refused; the layout is garbage-collected by Foundry, not by clients

So whatever was pushed survives a restart, and 'foundry pull oci-layout:PATH...' sees it
too. Any number of repositories are served over the one layout, which is one content
store: every repository sees every blob and manifest by digest (a cross-repository blob
mount succeeds whenever the blob is there), and tags are per repository. The -repo
repository (default "foundry") has the layout's own tags, the ones Foundry writes: pull
HOST:PORT/foundry@sha256:...; a tag T pushed to another repository R is recorded in
index.json as "R:T". A repository exists once it has a tag or was pushed to; others
answer NAME_UNKNOWN. Names, tags and digests outside the distribution spec's grammar are
refused (400).

The server speaks plain HTTP and has no authentication. On a loopback address it accepts
pushes; on any other address it is read-only unless -allow-push is given (then anyone who
can reach it can push). Foundry's own client uses plain HTTP only for 127.0.0.1 and
localhost; other tools need their insecure flag (crane --insecure, cosign
--allow-http-registry). -addr with port 0 picks a free port and prints it.

Examples:
  foundry registry serve                                  # 127.0.0.1:5000, .foundry/registry
  foundry registry serve -addr 127.0.0.1:5001 -root /srv/foundry-registry
  crane pull --insecure --format=oci 127.0.0.1:5000/foundry@sha256:4f2a... ./copy
  cosign verify-attestation --key foundry.pub --type https://slsa.dev/provenance/v1 \
      --insecure-ignore-tlog --allow-http-registry 127.0.0.1:5000/foundry@sha256:4f2a...

Exit codes: 0 stopped by SIGINT/SIGTERM, 1 could not open the layout or listen, 2 usage
error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			addr := fs.String("addr", "127.0.0.1:5000", "listen on `HOST:PORT`")
			root := fs.String("root", "", "the OCI layout to serve, created if missing (default DIR/.foundry/registry)")
			repo := fs.String("repo", "foundry", "the repository `NAME` whose tags are the layout's own")
			allowPush := fs.Bool("allow-push", false, "accept pushes on a non-loopback address (no authentication!)")
			project := fs.String("C", ".", "project `DIR`")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "registry", format, a...) }
				failed := func(format string, a ...any) int {
					fmt.Fprintf(env.stderr, "foundry registry serve: "+format+"\n", a...)
					return exitError
				}
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				if len(args) != 1 || args[0] != "serve" {
					return usage("want 'foundry registry serve'")
				}
				dir := *root
				if dir == "" {
					dir = filepath.Join(*project, workspace.StateDir, "registry")
				}
				l, err := registry.OpenLayout(dir)
				if err != nil {
					return failed("%v", err)
				}
				logger := log.New(env.stderr, "registry: ", log.LstdFlags)
				h, err := registry.Handler(l, *repo, logger)
				if err != nil {
					return failed("%v", err)
				}
				ln, err := net.Listen("tcp", *addr)
				if err != nil {
					return failed("%v", err)
				}
				host, _, _ := net.SplitHostPort(ln.Addr().String())
				mode := "read-write"
				if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) && !*allowPush {
					h, mode = registry.ReadOnly(h), "read-only (use -allow-push to accept pushes)"
				}
				srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
				fmt.Fprintf(env.stdout, "serving %s as %s/%s, %s (plain HTTP, no authentication)\n", l, ln.Addr(), *repo, mode)
				ctx, stop := serveContext()
				defer stop()
				errc := make(chan error, 1)
				go func() { errc <- srv.Serve(ln) }()
				serveStarted(ln.Addr().String())
				select {
				case err := <-errc:
					return failed("%v", err)
				case <-ctx.Done():
				}
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
					return failed("shutting down: %v", err)
				}
				fmt.Fprintln(env.stdout, "stopped")
				return exitOK
			}
		},
	})
}
