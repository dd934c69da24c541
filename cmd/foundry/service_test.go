package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/executors/executortest"
)

// brokenGreeters are recipes added to the greeter example: one whose entrypoint is not
// executable and one whose service exits before it is ready. Both sort before the example's
// recipes (cost 0) and must be rejected as candidates, not abort the run.
const brokenGreeters = `
recipe "greeter-broken" {
  provides = capability.greeter
  cost     = 0
  package {
    base  = seed.busybox
    files = { "/bin/greeter" = "#!/bin/sh\nexit 0\n" } # mode 0644: cannot be executed
  }
}

recipe "greeter-crashes" {
  provides = capability.greeter
  cost     = 0
  step "build" {
    image   = seed.busybox
    run     = ["sh", "-c", "mkdir -p /out/bin && printf '#!/bin/sh\\necho port already taken >&2\\nexit 3\\n' > /out/bin/greeter && chmod 755 /out/bin/greeter"]
    outputs = ["/out/bin/greeter"]
  }
  package {
    base  = seed.busybox
    files = { "/bin/greeter" = step.build.output["/out/bin/greeter"] }
  }
}
`

// The greeter example end to end: a service capability is evaluated by starting each
// candidate in a sandbox and sending the cases' HTTP requests from inside its network
// namespace. Candidates that cannot start or exit early are rejected with a reason; the
// first-name recipe passes dev and fails a sealed case; the full-name one is admitted,
// published and pinned by the next plan; no service process outlives the run.
func TestGreeterServiceAdmission(t *testing.T) {
	needSandbox(t)
	dir := copyExample(t, "greeter")
	f, err := os.OpenFile(filepath.Join(dir, "main.hcl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(brokenGreeters); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		": 0 steps, 1 capability to build",
		"recipe.greeter-broken: failed the dev suite: the entrypoint could not be started",
		`got:      exec: "/bin/greeter": permission denied`,
		"recipe.greeter-crashes: failed the dev suite: exited before it was ready",
		`got:      exit 3; output "port already taken"`,
		"eval capability.greeter: dev suite: 3 of 3 cases passed",
		"recipe.greeter-first-name: failed the sealed suite: output differs at $.greeting",
		"counterexample sealed/full-name.json",
		`input:    request 2 of 2: POST /cgi-bin/greet {"name":"Ada Lovelace"}`,
		`expected: {"greeting":"Hello, Ada Lovelace!"}`,
		`got:      {"greeting":"Hello, Ada!"}`,
		"ADM capability.greeter: recipe.greeter-full-name admitted",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("apply output:\n%s", r.stderr)
	}
	if executortest.ProcRunning("httpd\x00-f\x00-p\x00127.0.0.1:8080") {
		t.Errorf("a candidate's httpd is still running after apply")
	}

	code, out, _ := foundry(t, dir, "plan", "-json")
	p := decodePlan(t, out)
	// Pinned: nothing to run or build, not even the seed only its recipes use.
	if code != 0 || p.Capabilities[0].Status != plan.StatusRegistry || p.Summary.Run != 0 || p.Summary.Build != 0 {
		t.Fatalf("second plan: %+v %+v", p.Capabilities[0], p.Summary)
	}
	for _, n := range p.Nodes {
		if n.Address == "seed.busybox" && n.Status != plan.StatusAlternative {
			t.Errorf("seed.busybox is %q in the second plan; only unchosen recipes use it", n.Status)
		}
	}
	code, out, errs := foundry(t, dir, "verify", "-key", filepath.Join(dir, ".foundry", "keys", "signing.pub"), p.Capabilities[0].Pinned.Ref)
	if code != 0 || !strings.Contains(out, "PASS sealed-evaluation") {
		t.Errorf("verify of the admitted service: exit %d\n%s%s", code, out, errs)
	}
}
