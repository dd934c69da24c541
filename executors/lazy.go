package executors

import (
	"context"
	"sync"
)

// Opener is an Executor that connects to its runtime on first use (Lazy). Open connects now
// and returns the executor to use, or why there is none; the engine calls it before the
// first action of an apply, so that it can fail the apply once, clearly, and clean up after
// crashed runs before it creates anything.
type Opener interface {
	Executor
	Open(ctx context.Context) (Executor, error)
}

// Lazy stands for an executor that is opened only when it is first needed: an apply whose
// steps are all cached never connects to containerd (or looks for runc). Isolation is known
// up front; every other method opens the executor first. Opening happens once: its result,
// executor or error, is kept.
type Lazy struct {
	name      string
	isolation string
	open      func(context.Context) (Executor, error)

	mu     sync.Mutex
	opened bool
	e      Executor
	err    error
}

var _ Opener = (*Lazy)(nil)

// NewLazy returns a Lazy that calls open on first use. name is what Name reports until
// then ("auto" when open chooses); isolation is what the opened executor's Isolation will
// be.
func NewLazy(name, isolation string, open func(context.Context) (Executor, error)) *Lazy {
	return &Lazy{name: name, isolation: isolation, open: open}
}

// Open implements Opener.
func (l *Lazy) Open(ctx context.Context) (Executor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.opened {
		l.opened = true
		l.e, l.err = l.open(ctx)
		if l.err != nil {
			l.e = nil // not a typed nil pointer in an interface
		}
	}
	return l.e, l.err
}

// Name is the opened executor's name, or the name given to NewLazy before it is opened.
func (l *Lazy) Name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.e != nil {
		return l.e.Name()
	}
	return l.name
}

// Isolation implements Executor without opening it.
func (l *Lazy) Isolation() string { return l.isolation }

// Run implements Executor.
func (l *Lazy) Run(ctx context.Context, a *Action) (*Result, error) {
	e, err := l.Open(ctx)
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, a)
}

// Cleanup implements Executor.
func (l *Lazy) Cleanup(ctx context.Context, prefix string) error {
	e, err := l.Open(ctx)
	if err != nil {
		return err
	}
	return e.Cleanup(ctx, prefix)
}

// Close closes the executor if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opened = true // nothing opens it after Close
	if l.e == nil {
		return nil
	}
	return l.e.Close()
}
