package containerd_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd"
	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/snapshots"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/executors/executortest"
	"github.com/foundry-build/foundry/executors/runc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	executortest.RemoveImages()
	os.Exit(code)
}

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
		// BOOTID/PID/START
		if f := strings.Split(l["foundry.keeper"], "/"); err == nil && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			ks = append(ks, x.ID())
		}
	}
	return ks
}

// TestSharedShimLost kills the executor's shared shims; the next actions must still run.
func TestSharedShimLost(t *testing.T) {
	e := newExecutor(t)
	img := executortest.BusyboxLayout(t)
	run := func(id string) {
		t.Helper()
		a := &executors.Action{ID: id, Image: img, Argv: []string{"/bin/true"}, OutDir: t.TempDir()}
		if r, err := e.Run(context.Background(), a); err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
	}
	run("shimlost-1")
	var ks []string
	for i := 0; i < 100 && len(ks) == 0; i++ {
		ks = keepers(t, os.Getpid())
		time.Sleep(100 * time.Millisecond)
	}
	if len(ks) == 0 {
		t.Fatalf("no keeper for this process")
	}
	run("shimlost-2") // through a shared shim
	for _, k := range keepers(t, os.Getpid()) {
		pid := shimPid(t, k)
		if pid == 0 {
			t.Fatalf("no shim process for %s", k)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	run("shimlost-3")
	run("shimlost-4")
	_ = e.Close() // the keeper's task died with its shim; Close may report that
	if err := func() error {
		e2 := newExecutor(t)
		defer e2.Close()
		return e2.Cleanup(context.Background(), "shimlost-")
	}(); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	if left := leftovers(t, "shimlost-"); len(left) > 0 {
		t.Errorf("leftovers: %v", left)
	}
}

// shimPid finds the shim process started for container id.
func shimPid(t *testing.T, id string) int {
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(b), "\x00-id\x00"+id+"\x00") {
			pid, _ := strconv.Atoi(ent.Name())
			return pid
		}
	}
	return 0
}

// A task whose creation the daemon finished after a cleanup had deleted its container (the
// dead client's NewTask was still in flight) has no container left to be found by. Cleanup
// finds it in the task list and removes it.
func TestCleanupFindsOrphanedTask(t *testing.T) {
	e := newExecutor(t)
	defer e.Close()
	c, err := ctrd.New(address(), ctrd.WithDefaultNamespace(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prefix := "orphantask-" + strconv.Itoa(os.Getpid()) + "-"
	id := prefix + "1"
	ctx := namespaces.WithNamespace(context.Background(), testNamespace)
	lctx, _, err := c.WithLease(ctx, leases.WithID(id), leases.WithExpiration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// A parked task like a keeper's: an empty root and an argv that exists everywhere.
	wdir := t.TempDir()
	os.Mkdir(filepath.Join(wdir, "out"), 0o755)
	os.Mkdir(filepath.Join(wdir, "tmp"), 0o755)
	spec, err := runc.Spec(&executors.Action{ID: id, Argv: []string{"/proc/self/exe"}, OutDir: t.TempDir()},
		runc.SpecOptions{RootPath: "rootfs", CgroupsPath: "/" + testNamespace + "/" + id, Writable: wdir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SnapshotService("overlayfs").Prepare(lctx, id, ""); err != nil {
		t.Fatal(err)
	}
	ctr, err := c.NewContainer(lctx, id, ctrd.WithSnapshotter("overlayfs"), ctrd.WithSnapshot(id),
		ctrd.WithRuntime("io.containerd.runc.v2", nil), ctrd.WithSpec(spec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctr.NewTask(lctx, cio.NullIO); err != nil {
		t.Fatal(err)
	}
	// What a cleanup that raced the task's creation leaves: the task, without its container.
	if err := c.ContainerService().Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if !taskListed(t, c, id) {
		t.Fatal("the task went with its container record; nothing to test")
	}
	if err := e.Cleanup(context.Background(), prefix); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	if taskListed(t, c, id) {
		t.Errorf("the orphaned task %s survived Cleanup", id)
	}
	deadline := time.Now().Add(5 * time.Second)
	for shimPid(t, id) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if shimPid(t, id) != 0 {
		t.Errorf("the shim of the orphaned task still runs")
	}
	if left := leftovers(t, prefix); len(left) > 0 {
		t.Errorf("leftovers: %v", left)
	}
}

func taskListed(t *testing.T, c *ctrd.Client, id string) bool {
	t.Helper()
	resp, err := c.TaskService().List(namespaces.WithNamespace(context.Background(), testNamespace), &tasks.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range resp.Tasks {
		if x.ID == id {
			return true
		}
	}
	return false
}
