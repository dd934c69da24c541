package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// examples/self, offline: its full apply builds Foundry from the module proxy and takes
// minutes (`make example`), so CI checks what keeps it from rotting without the network.
// Its module pin must be the one made from this go.mod and go.sum (else `make
// example-self-pin`); every directory of the main module that cmd/foundry or the checked
// packages build from must be a layer of seed.src; and the project validates and plans, its
// fixed-output step asking for a grant.
func TestExampleSelf(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ex := filepath.Join(root, "examples", "self")
	hcl, err := os.ReadFile(filepath.Join(ex, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}

	// The pin: modules_pin names the SHA-256 of the go.mod and go.sum its output_digest
	// was made from.
	for _, f := range []struct{ key, file string }{{"go_mod", "go.mod"}, {"go_sum", "go.sum"}} {
		m := regexp.MustCompile(`(?m)^\s*` + f.key + `\s*=\s*"([0-9a-f]{64})"`).FindSubmatch(hcl)
		if m == nil {
			t.Fatalf("examples/self/main.hcl: no %s = \"<sha256>\" in locals.modules_pin", f.key)
		}
		b, err := os.ReadFile(filepath.Join(root, f.file))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != string(m[1]) {
			t.Errorf("%s changed since examples/self's module pin was made (it has sha256 %s, the pin was made from %s): run `make example-self-pin` (it needs the module proxy) and commit examples/self/main.hcl", f.file, got, m[1])
		}
	}

	// The project: its own files, copied (its .foundry, if an apply made one, stays behind).
	dir := t.TempDir()
	for _, f := range []string{"main.hcl", "README.md", "smoke/main.hcl"} {
		b, err := os.ReadFile(filepath.Join(ex, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := []string{"-var", "repo=" + root, "-var", "goproxy=http://127.0.0.1:9", "-var", "goproxy_host=127.0.0.1:9"}
	if code, out, errOut := runCLI(t, append(append([]string{"validate"}, vars...), dir)...); code != 0 {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, append(append([]string{"plan", "-json"}, vars...), dir)...)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	var p struct {
		Inputs []struct{ Kind, Path string }
		Nodes  []struct{ Address, Status string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, out)
	}
	status := map[string]string{}
	for _, n := range p.Nodes {
		status[n.Address] = n.Status
	}
	for addr, want := range map[string]string{
		"product.foundry.step.modules": "needs-grant",
		"product.foundry.step.build":   "run",
		"product.foundry.check.unit":   "run",
		"product.foundry.check.smoke":  "run",
	} {
		if status[addr] != want {
			t.Errorf("plan: %s is %q, want %q (%v)", addr, status[addr], want, status)
		}
	}
	var layers []string
	for _, in := range p.Inputs {
		if in.Kind == "host_dir" && strings.HasPrefix(in.Path, root+"/") {
			layers = append(layers, strings.TrimPrefix(in.Path, root+"/"))
		}
	}

	// The directories the build and the unit check compile from, as the go command lists
	// them (offline: what cmd/foundry builds from is in the module cache).
	checked := regexp.MustCompile(`"go", "test", [^\]]*`).Find(hcl)
	if checked == nil {
		t.Fatal(`examples/self/main.hcl: no check running ["go", "test", ...]`)
	}
	pkgs := []string{"./cmd/foundry"}
	for _, m := range regexp.MustCompile(`"(\./[^"]+)"`).FindAllSubmatch(checked, -1) {
		pkgs = append(pkgs, string(m[1]))
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-test", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	for _, d := range strings.Fields(string(b)) {
		rel, err := filepath.Rel(root, d)
		if err != nil || rel == "." {
			continue
		}
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		if !slices.Contains(layers, top) {
			layers = append(layers, top) // reported once
			t.Errorf("examples/self: package directory %s is not in seed.src's layers %v: add a layer for %s", rel, layers, top)
		}
	}
}
