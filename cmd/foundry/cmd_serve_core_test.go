package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveProject, the core of `foundry serve`, without the CLI: a project whose registry
// does not exist yet has nothing to serve, says so, exits 1 and listens nowhere.
func TestServeProjectNothingToServe(t *testing.T) {
	project, tool := testdata(t)
	dir := filepath.Join(t.TempDir(), "p")
	copyTree(t, project, dir)
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: os.Getenv}
	started := false
	old := serveStarted
	serveStarted = func(string) { started = true }
	defer func() { serveStarted = old }()
	code := serveProject(env, serveOptions{Project: dir, Vars: &varFlags{vars: map[string]string{"tool": tool}}, Addr: "127.0.0.1:0"})
	if code != exitError || started || !strings.Contains(errb.String(), "foundry serve: nothing to serve: no capability of the project has an admitted cli version") {
		t.Fatalf("exit %d, listened %v, stderr:\n%s", code, started, errb.String())
	}
}
