package main

import (
	"context"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/executors/local"
)

// containerdAvailable says the containerd executor is built in: auto selects it whenever
// its socket answers.
const containerdAvailable = true

func openContainerd(ctx context.Context, addr string) (executors.Executor, error) {
	return containerd.New(ctx, containerd.Options{Address: addr})
}

func openLocal() (executors.Executor, error) { return local.New(), nil }
