package evaluate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
)

// Limits of one evaluation sandbox: each case runs in a fresh one, and so does each call of
// an admitted capability (engine/invoke), under the same limits it was evaluated under.
const (
	evalMemoryBytes = 512 << 20
	evalCPUs        = 1
	evalPids        = 256
	evalTimeout     = 60 * time.Second
	evalOutputBytes = 8 << 20  // stdout, and a service's response body
	evalStderrBytes = 64 << 10 // stderr
)

// CandidateKey names a candidate: its package tree on its base image (zero: the tree alone).
func CandidateKey(tree digest.Digest, base executors.Image) (digest.Digest, error) {
	key, _, err := digest.Of(map[string]any{"tree": tree, "base": base.Digest})
	return key, err
}

// CandidateImage is the image a capability's candidate runs in: the base image (its layers
// and env) with the package tree laid over /; without a base (base.Digest empty), the tree
// alone, with no env. It is built once per candidate key in ws's seed store; name and
// target (the capability's) label it and set its platform.
func CandidateImage(ctx context.Context, ws *workspace.Workspace, name, target string, tree digest.Digest, base executors.Image) (executors.Image, error) {
	key, err := CandidateKey(tree, base)
	if err != nil {
		return executors.Image{}, err
	}
	dir, err := ws.MaterializeTree(tree)
	if err != nil {
		return executors.Image{}, err
	}
	spec := &seed.Spec{Name: "candidate-" + name, Platform: target, Key: "candidate " + string(key)}
	if base.Digest != "" {
		b := base
		spec.Layers = append(spec.Layers, seed.Layer{From: &b})
		spec.Env = seed.EnvMap(base.Env)
	}
	spec.Layers = append(spec.Layers, seed.Layer{Dir: dir, At: "/"})
	return ws.Seeds.Build(ctx, spec)
}

// Sandbox runs a capability's entrypoint once per call in a fresh evaluation sandbox: its
// own empty /out, workdir /, the image's env, no network but its own loopback, and the
// evaluation limits (512 MiB, 1 CPU, 256 pids, 60 s). The evaluator runs every case in
// one; engine/invoke runs every call of an admitted capability in one.
type Sandbox struct {
	// Executor returns the executor, opened on first use, for what is about to run.
	Executor func(ctx context.Context, what string) (executors.Executor, error)
	// Scratch is where each sandbox gets its own /out, removed when it ends; each
	// sandbox's container ID starts with ContainerPrefix, by which leftovers of a crash
	// are found.
	Scratch, ContainerPrefix string
}

// Run runs entrypoint in img once, for what (named when the executor cannot be opened). The caller's a supplies
// stdin, the output writers and, for a service, Attach; Run sets everything else.
func (s Sandbox) Run(ctx context.Context, what string, entrypoint []string, img executors.Image, a executors.Action) (*executors.Result, error) {
	id := workspace.NewID()
	scratch := filepath.Join(s.Scratch, "eval-"+id)
	out := filepath.Join(scratch, "out")
	if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, err
	}
	os.Chmod(out, 0o777)
	defer os.RemoveAll(scratch)
	a.ID = s.ContainerPrefix + "eval-" + id
	a.Image, a.Argv, a.Env, a.Workdir, a.OutDir = img, entrypoint, img.Env, "/", out
	a.Network = executors.NetworkNone
	a.Limits = executors.Limits{MemoryBytes: evalMemoryBytes, CPUs: evalCPUs, Pids: evalPids, Timeout: evalTimeout}
	exe, err := s.Executor(ctx, what)
	if err != nil {
		return nil, err
	}
	return exe.Run(ctx, &a)
}

// RunCLI runs a cli capability's entrypoint in img once with stdin as its standard input
// and returns what it observed: stdout (at most 8 MiB, and whether more came), stderr (at
// most 64 KiB), the exit code, a timeout or an out-of-memory kill. An entrypoint that
// cannot be executed is an error wrapping executors.ErrNotStarted.
func (s Sandbox) RunCLI(ctx context.Context, what string, entrypoint []string, img executors.Image, stdin []byte) (verdict.Observation, error) {
	stdout := capped.NewBuffer(evalOutputBytes)
	stderr := capped.NewBuffer(evalStderrBytes)
	xr, err := s.Run(ctx, what, entrypoint, img, executors.Action{Stdin: bytes.NewReader(stdin), Stdout: stdout, Stderr: stderr})
	if err != nil {
		return verdict.Observation{}, err
	}
	return verdict.Observation{Stdout: stdout.B.Bytes(), Stderr: stderr.B.Bytes(), ExitCode: xr.ExitCode,
		TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled, StdoutTruncated: stdout.Truncated}, nil
}
