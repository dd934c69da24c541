package executors

import (
	"context"
	"errors"
	"testing"
)

type fakeExecutor struct{ closed int }

func (f *fakeExecutor) Name() string                                  { return "fake" }
func (f *fakeExecutor) Isolation() string                             { return IsolationContainer }
func (f *fakeExecutor) Run(context.Context, *Action) (*Result, error) { return &Result{}, nil }
func (f *fakeExecutor) Cleanup(context.Context, string) error         { return nil }
func (f *fakeExecutor) Close() error                                  { f.closed++; return nil }

func TestLazyOpensOnceOnFirstUse(t *testing.T) {
	opens := 0
	f := &fakeExecutor{}
	l := NewLazy("auto", IsolationContainer, func(context.Context) (Executor, error) { opens++; return f, nil })
	if l.Isolation() != IsolationContainer || l.Name() != "auto" || opens != 0 {
		t.Fatalf("Isolation and Name must not open it: opened %d times, name %q", opens, l.Name())
	}
	if _, err := l.Run(context.Background(), &Action{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Cleanup(context.Background(), "x-"); err != nil {
		t.Fatal(err)
	}
	if e, err := l.Open(context.Background()); e != f || err != nil {
		t.Fatalf("Open: %v %v", e, err)
	}
	if opens != 1 || l.Name() != "fake" {
		t.Fatalf("opened %d times, name %q; want once, fake", opens, l.Name())
	}
	if err := l.Close(); err != nil || f.closed != 1 {
		t.Fatalf("Close: %v, closed %d", err, f.closed)
	}
}

func TestLazyNeverOpenedClosesNothing(t *testing.T) {
	l := NewLazy("runc", IsolationContainer, func(context.Context) (Executor, error) {
		t.Fatal("opened")
		return nil, nil
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open(context.Background()); err != nil {
		t.Fatal("Open after Close must not open either")
	}
}

func TestLazyKeepsTheOpenError(t *testing.T) {
	opens := 0
	boom := errors.New("no socket")
	l := NewLazy("containerd", IsolationContainer, func(context.Context) (Executor, error) {
		opens++
		return (*fakeExecutor)(nil), boom // a typed nil, as New functions return
	})
	for i := 0; i < 2; i++ {
		if _, err := l.Run(context.Background(), &Action{}); !errors.Is(err, boom) {
			t.Fatalf("Run: %v", err)
		}
	}
	if opens != 1 {
		t.Errorf("opened %d times, want once", opens)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after a failed open: %v", err)
	}
}
