// Command dev-temporal runs a Temporal server for trying 'foundry apply -engine temporal' and
// 'foundry worker' on one machine: Temporal's own test server (go.temporal.io/server's
// temporaltest: every service in this process, SQLite in memory). It is a separate module so
// that the server and its dependencies stay out of the foundry binary. Nothing survives it:
// stop it and its workflows are gone.
//
//	cd devtemporal && go run ./cmd/dev-temporal -addr-file /tmp/temporal.addr
//
// It prints the frontend's HOST:PORT and the namespace to give foundry (-temporal-address,
// -namespace), writes them to -addr-file when given, and serves until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/server/temporaltest"
)

func main() {
	addrFile := flag.String("addr-file", "", "write \"HOST:PORT NAMESPACE\" to `FILE` once the server answers")
	flag.Parse()
	ts := temporaltest.NewServer()
	defer ts.Stop()
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	// A client's first call proves the frontend answers before anyone is told where it is.
	ts.GetDefaultClient()
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(addr+" "+ns+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dev-temporal:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("Temporal dev server on %s, namespace %s (in memory; stop with Ctrl-C)\n", addr, ns)
	fmt.Printf("  foundry worker -temporal-address %s -namespace %s\n", addr, ns)
	fmt.Printf("  foundry apply -engine temporal -temporal-address %s -namespace %s\n", addr, ns)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
}
