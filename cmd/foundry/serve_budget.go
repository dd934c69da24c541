package main

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/foundry-build/foundry/engine/invoke"
)

// What foundry serve lets its calls' inputs cost in memory (spec/serve.md §2). A call
// reserves its share before it pays it, and waits at most budgetWait for it (then 503):
//
//   - bodyMemory holds the bodies being read or waiting to run, each reserved at twice its
//     size (the body and the compacted copy the capability reads on stdin) from its
//     Content-Length before a byte is read, or at twice maxCallInput when the client does
//     not say; a reservation is cut to the body's size once it is read;
//   - checkMemory holds the inputs being decoded and validated: twice the body's size and
//     valueCost for each JSON value it holds (counted by a scan that decodes nothing, and
//     at most invoke.MaxInputValues), released as soon as the check is done.
//
// The two are separate so that a call holding its body never waits for a check behind
// calls that hold theirs.
const (
	bodyMemory  = 64 << 20
	checkMemory = 192 << 20
	valueCost   = 512
	budgetWait  = 10 * time.Second
	// bodyReadTimeout bounds reading a body, so that a client sending slowly cannot hold
	// its reservation for long.
	bodyReadTimeout = 60 * time.Second
)

// memoryBudget is a pool of bytes that calls reserve from.
type memoryBudget struct {
	sem  *semaphore.Weighted
	size int64
}

func newMemoryBudget(size int64) *memoryBudget {
	return &memoryBudget{sem: semaphore.NewWeighted(size), size: size}
}

// reserve takes n bytes (at least 1, at most the whole pool), waiting until ctx is done or
// budgetWait has passed; nil when it could not.
func (b *memoryBudget) reserve(ctx context.Context, n int64) *reservation {
	n = min(max(n, 1), b.size)
	ctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	if b.sem.Acquire(ctx, n) != nil {
		return nil
	}
	return &reservation{b: b, n: n}
}

// A reservation is bytes taken from a memoryBudget.
type reservation struct {
	b *memoryBudget
	n int64
}

// shrink gives back what the reservation holds beyond n bytes (at least 1 is kept).
func (r *reservation) shrink(n int64) {
	if n = max(n, 1); n < r.n {
		r.b.sem.Release(r.n - n)
		r.n = n
	}
}

// release gives back all of it; once.
func (r *reservation) release() {
	if r.n > 0 {
		r.b.sem.Release(r.n)
		r.n = 0
	}
}

// checkCost is what checking an input of size bytes holding values values may take.
func checkCost(size, values int) int64 {
	return 2*int64(size) + int64(min(values, invoke.MaxInputValues+1))*valueCost
}
