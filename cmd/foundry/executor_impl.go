package main

import (
	"errors"

	"github.com/foundry-build/foundry/executors"
)

// containerdAvailable is false until the containerd executor lands.
const containerdAvailable = false

func openContainerd(addr string) (executors.Executor, error) {
	return nil, errors.New("the containerd executor is not built into this foundry yet; use -executor runc")
}

func openLocal() (executors.Executor, error) {
	return nil, errors.New("the local executor is not built into this foundry yet; use -executor runc")
}
