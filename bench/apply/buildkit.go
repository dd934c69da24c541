package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/bench/benchutil"
)

// buildkit is BuildKit's side of the chain comparison (benchutil.BuildKit): the chain as a
// Dockerfile on the busybox base, built from a context directory of its own.
type buildkit struct {
	*benchutil.BuildKit
	last string // the Dockerfile last written
}

// startBuildkit starts buildkitd from dir (scripts/buildkit.sh prints it) and waits until it
// answers. It is stopped at exit if not before.
func startBuildkit(dir string) *buildkit {
	bk, err := benchutil.StartBuildKit(dir, []string{"sh", "cat", "echo"})
	must(err)
	atExit(bk.Stop)
	must(os.MkdirAll(filepath.Join(bk.Root, "context"), 0o755))
	return &buildkit{BuildKit: bk}
}

// build writes the Dockerfile, if it changed, and builds it, exporting nothing; it returns
// the wall time of buildctl.
func (b *buildkit) build(dockerfile string) time.Duration {
	ctx := filepath.Join(b.Root, "context")
	if dockerfile != b.last {
		must(os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(dockerfile), 0o644))
		b.last = dockerfile
	}
	d, _, _, err := b.Build("--local", "context="+ctx, "--local", "dockerfile="+ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		exit(1)
	}
	return d
}

func (b *buildkit) stop() { b.Stop() }

// chainDockerfile is benchChain's chain for BuildKit: each step a stage on the busybox base
// that bind-mounts the previous stage's /out/o at /in, as Foundry's step mounts it, and writes
// /out/o with the same shell command. nonce goes into step 0's output, so a new nonce makes
// every step run again (each step's input changes) while the base stays imported.
func chainDockerfile(nonce string) string {
	var b strings.Builder
	for i := range chainSteps {
		fmt.Fprintf(&b, "FROM bb AS s%d\n", i)
		if i == 0 {
			fmt.Fprintf(&b, "RUN echo 0 %s > /out/o\n", nonce)
			continue
		}
		fmt.Fprintf(&b, "RUN --mount=type=bind,from=s%d,source=/out/o,target=/in cat /in > /out/o; echo %d >> /out/o\n", i-1, i)
	}
	return b.String()
}
