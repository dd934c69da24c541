package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/runc"
)

const defaultContainerdAddress = "/run/foundry-containerd/containerd.sock"

// executorFlags select and configure the executor of apply.
type executorFlags struct {
	name       string
	containerd string
	allowLocal bool
}

func (e *executorFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&e.name, "executor", "auto", "`NAME` of the executor: auto (containerd when its socket answers, else runc), containerd, runc, or local (unsandboxed; needs -unsandboxed)")
	fs.StringVar(&e.containerd, "containerd-address", "", "containerd socket `PATH` (default $FOUNDRY_CONTAINERD_ADDRESS, else "+defaultContainerdAddress+")")
	fs.BoolVar(&e.allowLocal, "unsandboxed", false, "allow -executor local, which runs steps as plain host processes; provenance records isolation \"none\"")
}

// open returns the executor the flags select. It is opened (the containerd socket probed
// and connected to, runc looked up) only when apply first needs it: an apply with nothing to
// run never contacts the runtime. A bad flag is reported at once.
func (e *executorFlags) open(env *cliEnv) (executors.Executor, error) {
	addr := e.containerd
	if addr == "" {
		addr = env.getenv("FOUNDRY_CONTAINERD_ADDRESS")
	}
	if addr == "" {
		addr = defaultContainerdAddress
	}
	isolation := executors.IsolationContainer
	switch e.name {
	case "auto", "runc", "containerd":
	case "local":
		if !e.allowLocal {
			return nil, fmt.Errorf("-executor local runs steps unsandboxed on this machine; add -unsandboxed to confirm")
		}
		isolation = executors.IsolationNone
	default:
		return nil, fmt.Errorf("unknown executor %q: use auto, containerd, runc or local", e.name)
	}
	return executors.NewLazy(e.name, isolation, func(ctx context.Context) (executors.Executor, error) {
		name := e.name
		if name == "auto" {
			name = "runc"
			if socketAnswers(addr) && containerdAvailable {
				name = "containerd"
			}
		}
		switch name {
		case "runc":
			return runc.New(runc.Options{})
		case "containerd":
			return openContainerd(ctx, addr)
		}
		return openLocal()
	}), nil
}

// socketAnswers reports whether a unix socket accepts connections.
func socketAnswers(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
