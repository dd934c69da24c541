package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/seed"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
	"github.com/foundry-build/foundry/registry"
)

// Activities is a worker's side: it runs actions in the worker's own executor, with the
// worker's workspace as its content store, input cache and seed images.
type Activities struct {
	Executor executors.Executor
	WS       *workspace.Workspace
	Identity string
	// Log receives one line per action started and ended; nil for none.
	Log func(format string, args ...any)

	regMu sync.Mutex
	regs  map[string]registry.Store
}

// prefix starts the ID of every container this worker makes: "fw-" and a hash of its
// workspace, so that a worker restarted on the same directory removes what the one before it
// left behind, and never another worker's.
func (a *Activities) prefix() string {
	h := sha256.Sum256([]byte(a.WS.Dir))
	return "fw-" + hex.EncodeToString(h[:4]) + "-"
}

// Cleanup removes the leftovers of an earlier worker on the same directory, killed mid-step.
func (a *Activities) Cleanup(ctx context.Context) error {
	return a.Executor.Cleanup(ctx, a.prefix())
}

func (a *Activities) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
	}
}

func (a *Activities) registry(addr string) (registry.Store, error) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if s, ok := a.regs[addr]; ok {
		return s, nil
	}
	if strings.HasPrefix(addr, registry.LayoutScheme) {
		return nil, fmt.Errorf("registry %q: a worker takes content from a remote registry (host[:port]/repository)", addr)
	}
	s, err := registry.Open(addr)
	if err != nil {
		return nil, err
	}
	if a.regs == nil {
		a.regs = map[string]registry.Store{}
	}
	a.regs[addr] = s
	return s, nil
}

// Run is the activity: fetch what req names, run it, push its /out and logs. A non-zero exit
// is a Result. Errors are infrastructure (retried, on any worker) unless typed ErrNotStarted
// or ErrBadRequest.
func (a *Activities) Run(ctx context.Context, req Request) (*Result, error) {
	info := activity.GetInfo(ctx)
	a.logf("start %s attempt %d", req.ID, info.Attempt)
	stop := heartbeat(ctx)
	defer stop()
	res, err := a.run(ctx, req)
	if err != nil {
		a.logf("error %s attempt %d: %v", req.ID, info.Attempt, err)
		return nil, err
	}
	res.Attempt = info.Attempt
	a.logf("done %s attempt %d: exit %d", req.ID, info.Attempt, res.ExitCode)
	return res, nil
}

// heartbeat tells Temporal every few seconds that the step is alive, so that a worker that
// dies is noticed within the heartbeat timeout and its step retried elsewhere.
func heartbeat(ctx context.Context) (stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return cancel
}

func badRequest(format string, args ...any) error {
	return sdktemporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrBadRequest, nil)
}

func (a *Activities) run(ctx context.Context, req Request) (*Result, error) {
	if len(req.Argv) == 0 || req.Image == "" {
		return nil, badRequest("action %s: no argv or no image", req.ID)
	}
	if req.Network != executors.NetworkNone {
		return nil, badRequest("action %s: network %q: a worker runs steps without network", req.ID, req.Network)
	}
	reg, err := a.registry(req.Registry)
	if err != nil {
		return nil, badRequest("action %s: %v", req.ID, err)
	}
	img, err := a.image(ctx, reg, digest.Digest(req.Image))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", digest.Digest(req.Image).Short(), err)
	}
	var mounts []executors.Mount
	for _, m := range req.Mounts {
		src, err := a.input(ctx, reg, m)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", m.Target, err)
		}
		mounts = append(mounts, executors.Mount{Source: src, Target: m.Target})
	}
	scratch, err := os.MkdirTemp(filepath.Join(a.WS.Dir, "runs"), "action-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	outDir := filepath.Join(scratch, "out")
	if err := os.Mkdir(outDir, 0o777); err != nil {
		return nil, err
	}
	if err := os.Chmod(outDir, 0o777); err != nil { // the sandbox user is not root
		return nil, err
	}
	stdout, stderr := capped.NewBuffer(req.LogBytes), capped.NewBuffer(req.LogBytes)
	action := &executors.Action{
		ID: strings.ToLower(a.prefix() + workspace.NewID()), Name: req.ID, Platform: req.Platform,
		Image: img, Argv: req.Argv, Env: req.Env, Workdir: req.Workdir, User: req.User,
		Mounts: mounts, OutDir: outDir, Network: req.Network,
		Limits: executors.Limits{MemoryBytes: req.Limits.MemoryBytes, CPUs: req.Limits.CPUs, Pids: req.Limits.Pids, Timeout: req.Limits.Timeout,
			DiskBytes: req.Limits.DiskBytes, Inodes: req.Limits.Inodes},
		Stdout: stdout, Stderr: stderr,
	}
	xr, err := a.Executor.Run(ctx, action)
	if err != nil {
		if errors.Is(err, executors.ErrNotStarted) {
			return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), ErrNotStarted, nil)
		}
		return nil, fmt.Errorf("the %s executor could not run it: %w", a.Executor.Name(), err)
	}
	res := &Result{
		ExitCode: xr.ExitCode, Signal: xr.Signal, TimedOut: xr.TimedOut, OOMKilled: xr.OOMKilled,
		Started: xr.Started, Finished: xr.Finished, CPU: xr.Usage.CPU, PeakMemory: xr.Usage.PeakMemoryBytes,
		Executor: a.Executor.Name(), Isolation: a.Executor.Isolation(), Worker: a.Identity,
	}
	if f := xr.Full; f != nil {
		res.Full = &Full{Limit: f.Limit, Bound: f.Bound, Where: f.Where}
	}
	if res.Stdout, err = a.pushBytes(ctx, reg, stdout.B.Bytes()); err != nil {
		return nil, err
	}
	if res.Stderr, err = a.pushBytes(ctx, reg, stderr.B.Bytes()); err != nil {
		return nil, err
	}
	// A failed step's /out is not an output of anything: only a success's is sent back.
	if xr.ExitCode == 0 && !xr.TimedOut && !xr.OOMKilled && xr.Full == nil {
		d, _, err := a.WS.Store.PutDir(outDir)
		if err != nil {
			return nil, fmt.Errorf("storing /out: %w", err)
		}
		size, err := registry.PushTree(ctx, reg, a.WS.Store, d)
		if err != nil {
			return nil, err
		}
		res.Out = Content{Digest: d, Size: size, Tree: true}
	}
	return res, nil
}

func (a *Activities) pushBytes(ctx context.Context, reg registry.Store, b []byte) (Content, error) {
	d, err := a.WS.Store.PutBytes(b)
	if err != nil {
		return Content{}, err
	}
	size, err := registry.PushBlob(ctx, reg, a.WS.Store, d)
	return Content{Digest: d, Size: size}, err
}

// image is the step's image on this worker: fetched once from the registry (each blob
// checked), imported into the worker's seed images and unpacked.
func (a *Activities) image(ctx context.Context, reg registry.Store, d digest.Digest) (executors.Image, error) {
	if err := d.Validate(); err != nil {
		return executors.Image{}, badRequest("%v", err)
	}
	key := "temporal-image:" + string(d)
	spec := func(dir string) *seed.Spec {
		return &seed.Spec{Name: "image " + d.Short(), Key: key, Import: &seed.Import{OCILayout: dir, Digest: string(d)}}
	}
	if a.WS.Seeds.Built(key) {
		return a.WS.Seeds.Build(ctx, spec(""))
	}
	dir, err := os.MkdirTemp(filepath.Join(a.WS.Dir, "runs"), "image-")
	if err != nil {
		return executors.Image{}, err
	}
	defer os.RemoveAll(dir)
	layout, err := registry.OpenLayout(dir)
	if err != nil {
		return executors.Image{}, err
	}
	if err := registry.CopyImage(ctx, layout, reg, d); err != nil {
		return executors.Image{}, err
	}
	return a.WS.Seeds.Build(ctx, spec(dir))
}

// input fetches one mount's content (checked) and materializes it read-only.
func (a *Activities) input(ctx context.Context, reg registry.Store, m Mount) (string, error) {
	c := m.Content
	if err := c.Digest.Validate(); err != nil {
		return "", badRequest("%v", err)
	}
	if c.Tree {
		if err := registry.FetchTree(ctx, reg, a.WS.Store, c.Digest, c.Size); err != nil {
			return "", err
		}
		return a.WS.MaterializeTree(c.Digest)
	}
	if err := registry.FetchBlob(ctx, reg, a.WS.Store, c.Digest, c.Size); err != nil {
		return "", err
	}
	mode := os.FileMode(0o644)
	if m.Mode&0o111 != 0 {
		mode = 0o755
	}
	return a.WS.MaterializeFile(c.Digest, mode)
}
