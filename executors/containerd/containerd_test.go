package containerd_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	ctrd "github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/snapshots"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/executors/executortest"
)

func address() string {
	if a := os.Getenv("FOUNDRY_CONTAINERD_ADDRESS"); a != "" {
		return a
	}
	return containerd.DefaultAddress
}

// testNamespace keeps test objects apart from real runs on the same daemon.
const testNamespace = "foundry-test"

func newExecutor(t *testing.T) *containerd.Executor {
	executortest.Require(t, containerd.Available(context.Background(), address()), "containerd at "+address()+" (scripts/containerd.sh start)")
	e, err := containerd.New(context.Background(), containerd.Options{Address: address(), Namespace: testNamespace})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// leftovers lists containers, snapshots and leases whose names start with prefix.
func leftovers(t *testing.T, prefix string) []string {
	c, err := ctrd.New(address(), ctrd.WithDefaultNamespace(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), testNamespace)
	var left []string
	cs, err := c.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		if strings.HasPrefix(x.ID(), prefix) {
			left = append(left, "container "+x.ID())
		}
	}
	err = c.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if strings.HasPrefix(info.Name, prefix) {
			left = append(left, "snapshot "+info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.LeasesService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if strings.HasPrefix(l.ID, prefix) {
			left = append(left, "lease "+l.ID)
		}
	}
	return left
}

func TestConformance(t *testing.T) {
	executortest.Require(t, containerd.Available(context.Background(), address()), "containerd at "+address()+" (scripts/containerd.sh start)")
	executortest.Run(t, executortest.Config{
		New:       func(t *testing.T) executors.Executor { return newExecutor(t) },
		Image:     func(t *testing.T) executors.Image { return executortest.BusyboxLayout(t) },
		Sandboxed: true,
		Leftovers: leftovers,
	})
}

// TestCloseStopsKeeper checks that Close removes the executor's keeper, so the shared shim
// exits, and that a keeper left by a dead process is removed by the next New.
func TestCloseStopsKeeper(t *testing.T) {
	e := newExecutor(t)
	img := executortest.BusyboxLayout(t)
	a := &executors.Action{ID: "keeper-" + strings.ToLower(t.Name()[:4]) + "-1", Image: img, Argv: []string{"/bin/true"}, OutDir: t.TempDir()}
	if r, err := e.Run(context.Background(), a); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if k := keepers(t, os.Getpid()); len(k) > 0 {
		t.Errorf("keepers of this process after Close: %v", k)
	}
}

// keepers lists keeper containers labelled with pid.
func keepers(t *testing.T, pid int) []string {
	c, err := ctrd.New(address(), ctrd.WithDefaultNamespace(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), testNamespace)
	cs, err := c.Containers(ctx, `labels."foundry.keeper"`)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, x := range cs {
		l, err := x.Labels(ctx)
		if err == nil && strings.HasSuffix(l["foundry.keeper"], "/"+strconv.Itoa(pid)) {
			ks = append(ks, x.ID())
		}
	}
	return ks
}
