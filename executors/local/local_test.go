package local_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/executortest"
	"github.com/foundry-build/foundry/executors/local"
)

func TestConformance(t *testing.T) {
	executortest.Run(t, executortest.Config{
		New: func(t *testing.T) executors.Executor { return local.New() },
		Image: func(t *testing.T) executors.Image {
			return executors.Image{Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}}
		},
	})
}

func TestRefusesMounts(t *testing.T) {
	a := &executors.Action{ID: "m", Argv: []string{"true"}, OutDir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Mounts: []executors.Mount{{Source: t.TempDir(), Target: "/src"}}}
	_, err := local.New().Run(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "/src") {
		t.Fatalf("Run with a mount: err = %v, want a refusal naming /src", err)
	}
}

func TestOutEnvAndDefaultWorkdir(t *testing.T) {
	out := t.TempDir()
	var stdout strings.Builder
	a := &executors.Action{ID: "o", Argv: []string{"sh", "-c", `echo "$FOUNDRY_OUT"; pwd; echo hi > "$FOUNDRY_OUT/f"`},
		OutDir: out, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &stdout}
	r, err := local.New().Run(context.Background(), a)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if want := out + "\n" + out + "\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if b, _ := os.ReadFile(out + "/f"); string(b) != "hi\n" {
		t.Errorf("OutDir/f = %q", b)
	}
	if local.New().Isolation() != executors.IsolationNone {
		t.Errorf("isolation %q", local.New().Isolation())
	}
}

// A child of a vforking Go process inherits the parent's peak RSS in its ru_maxrss: a
// trivial step under a big foundry must not report foundry's memory as its own.
func TestUsageExcludesFoundrysMemory(t *testing.T) {
	ballast := make([]byte, 128<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	a := &executors.Action{ID: "u", Argv: []string{"true"}, OutDir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	r, err := local.New().Run(context.Background(), a)
	runtime.KeepAlive(ballast)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if r.Usage.PeakMemoryBytes >= 64<<20 {
		t.Errorf("`true` reports a peak of %d bytes: foundry's own", r.Usage.PeakMemoryBytes)
	}
}
