package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/registry/registrytest"
)

// listEffectsJSON runs `foundry effects -json` in dir.
func listEffectsJSON(t *testing.T, dir string) []effectJSON {
	t.Helper()
	code, out, errs := foundry(t, dir, "effects", "-json")
	if code != exitOK {
		t.Fatalf("effects -json: exit %d\n%s", code, errs)
	}
	var effects []effectJSON
	if err := json.Unmarshal([]byte(out), &effects); err != nil {
		t.Fatalf("effects -json: %v\n%s", err, out)
	}
	return effects
}

// A publish cut short by a killed apply is listed as unknown; an operator resolves it
// with a recorded decision, once; the next apply then publishes it again.
func TestEffectsListAndResolve(t *testing.T) {
	needSandbox(t)
	dir := copyExample(t, "greeter")
	if code, out, _ := foundry(t, dir, "effects"); code != exitOK || !strings.Contains(out, "No effects are recorded (no project state in .)") {
		t.Errorf("effects before any apply: exit %d\n%s", code, out)
	}
	r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + admit.FaultAfterDispatch + ":capability.greeter"})
	if r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL as it publishes: exit %d\n%s", r.code, r.stderr)
	}
	var killed string
	for _, l := range strings.Split(r.stderr, "\n") {
		var e struct{ Type, Run string }
		if json.Unmarshal([]byte(l), &e) == nil && e.Type == "run_started" {
			killed = e.Run
		}
	}

	effects := listEffectsJSON(t, dir)
	if len(effects) != 1 {
		t.Fatalf("want the one publish, have %+v", effects)
	}
	e := effects[0]
	if e.Status != "unknown" || e.Run != killed || e.Address != "capability.greeter" || e.Kind != "publish" ||
		!strings.HasPrefix(e.Destination, "oci-layout:") || e.Result != "the run's process died after dispatch" || e.Decision != nil {
		t.Fatalf("the killed run's publish (run %s) = %+v", killed, e)
	}
	code, out, _ := foundry(t, dir, "effects")
	for _, want := range []string{e.ID + "  unknown", "publish of capability.greeter", "run          " + killed, "1 effect(s), 1 unknown: resolve with"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("effects lacks %q: exit %d\n%s", want, code, out)
		}
	}

	// Refusals change nothing.
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"resolve", e.ID, "-reason", "x"}, exitUsage, "resolve needs -status succeeded or -status failed"},
		{[]string{"resolve", e.ID, "-status", "unknown", "-reason", "x"}, exitUsage, "resolve needs -status succeeded or -status failed"},
		{[]string{"resolve", e.ID, "-status", "failed"}, exitUsage, "resolve needs -reason TEXT"},
		{[]string{"resolve", e.ID, "-status", "failed", "-reason", "x", "-result", "y"}, exitUsage, "-result is for -status succeeded"},
		{[]string{"resolve", e.ID, "-status", "succeeded", "-reason", "x", "-result", e.Destination + "@sha256:" + strings.Repeat("0", 64)}, exitError, "is not in " + e.Destination},
		{[]string{"resolve", e.ID, "-status", "succeeded", "-reason", "x", "-result", "oci-layout:/elsewhere@sha256:" + strings.Repeat("0", 64)}, exitError, "the reference in the effect's destination"},
		{[]string{"resolve", "eff-nope", "-status", "failed", "-reason", "x"}, exitError, "no effect eff-nope"},
		{[]string{"frob"}, exitUsage, `unknown action "frob"`},
	} {
		code, _, errs := foundry(t, dir, append([]string{"effects"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("effects %v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.msg, errs)
		}
	}
	if got := listEffectsJSON(t, dir); got[0].Status != "unknown" || got[0].Decision != nil {
		t.Fatalf("a refused resolve changed the effect: %+v", got[0])
	}

	// Resolved by a unique prefix of its ID, with the decision kept.
	code, out, errs := foundry(t, dir, "effects", "resolve", e.ID[:12], "-status", "failed", "-reason", "nothing reached the registry")
	if code != exitOK || !strings.Contains(out, "resolved "+e.ID) || !strings.Contains(out, "publishes it again") {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errs)
	}
	got := listEffectsJSON(t, dir)[0]
	if got.Status != "failed" || got.Decision == nil || got.Decision.Status != "failed" || got.Decision.Reason != "nothing reached the registry" ||
		got.Decision.By == "" || got.Decision.At.IsZero() {
		t.Fatalf("after resolve: %+v (decision %+v)", got, got.Decision)
	}
	code, out, _ = foundry(t, dir, "effects")
	if !strings.Contains(out, e.ID+"  failed") || !strings.Contains(out, "decided      failed, by "+got.Decision.By) || !strings.Contains(out, "nothing reached the registry") {
		t.Errorf("effects after resolve: exit %d\n%s", code, out)
	}
	code, _, errs = foundry(t, dir, "effects", "resolve", e.ID, "-status", "failed", "-reason", "again")
	if code != exitError || !strings.Contains(errs, "is failed, not unknown") {
		t.Errorf("resolving an effect that is not unknown: exit %d\n%s", code, errs)
	}

	// The next apply publishes it again as a retry of a known failure, not a reconciliation.
	r = apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "ADM capability.greeter") || strings.Contains(r.stderr, "REC capability.greeter") {
		t.Fatalf("apply after the resolve: exit %d\n%s", r.code, r.stderr)
	}
	got = listEffectsJSON(t, dir)[0]
	if got.Status != "succeeded" || !strings.HasPrefix(got.Result, e.Destination+"@sha256:") || got.Decision == nil || got.Decision.Reason != "nothing reached the registry" {
		t.Errorf("after the publish: %+v", got)
	}
}

// A publish whose outcome a kill lost, and that the registry cannot tell because it cannot
// be reached, blocks the apply that comes to it: exit 1, the effect still unknown (nothing
// dispatched), and a message naming 'foundry effects resolve'. Once the operator decides it
// failed, the next apply publishes it, once: the manifest has one verification summary.
func TestUnknownPublishBlocksUntilResolved(t *testing.T) {
	needSandbox(t)
	backend := registrytest.StartDistribution(t)
	front := &tcpProxy{to: backend}
	front.start(t, fmt.Sprintf("127.0.0.1:%d", registrytest.FreePort(t)))
	t.Cleanup(front.stop)
	dir := copyExample(t, "greeter")
	hcl := filepath.Join(dir, "main.hcl")
	b, err := os.ReadFile(hcl)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), `registry = "oci-layout:.foundry/registry"`, `registry = "`+front.addr+`/greeter"`, 1)
	if src == string(b) {
		t.Fatal("the greeter example no longer names its registry as this test expects")
	}
	os.WriteFile(hcl, []byte(src), 0o644)

	// Killed with the manifest and its attestations in the registry, before the tag.
	r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + admit.FaultAfterCommit + ":capability.greeter"})
	if r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL as it publishes: exit %d\n%s", r.code, r.stderr)
	}
	killed := runOf(t, r.stderr)

	front.stop() // the registry is unreachable
	r = apply(t, dir, nil, "-progress", "plain")
	effects := listEffectsJSON(t, dir)
	if len(effects) != 1 {
		t.Fatalf("want the one publish, have %+v", effects)
	}
	e := effects[0]
	if r.code != 1 {
		t.Fatalf("an apply that comes to an unknown publish it cannot reconcile: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"(effect " + e.ID + ") has an unknown outcome: run " + killed + " died after dispatching it",
		"its destination cannot tell whether it happened (the registry " + front.addr + "/greeter cannot be read",
		"'foundry effects resolve " + e.ID + " -status succeeded|failed -reason TEXT'"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	if e.Status != "unknown" || e.Run != killed || strings.Contains(r.stderr, "REC capability.greeter") || strings.Contains(r.stderr, "ADM capability.greeter") {
		t.Fatalf("the blocked apply moved the publish: %+v\n%s", e, r.stderr)
	}

	// The operator decides: it did not complete. The registry is back; the next apply
	// publishes it as a retry of a known failure, reusing what the killed one attached.
	front.start(t, front.addr)
	if code, out, errs := foundry(t, dir, "effects", "resolve", e.ID, "-status", "failed", "-reason", "the registry was down; no contract tag"); code != exitOK {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errs)
	}
	r = apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "ADM capability.greeter") || strings.Contains(r.stderr, "REC capability.greeter") || len(r.executed) != 0 {
		t.Fatalf("apply after the resolve: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	got := listEffectsJSON(t, dir)
	if len(got) != 1 || got[0].Status != "succeeded" || got[0].Decision == nil || got[0].Decision.Status != "failed" {
		t.Fatalf("after the publish: %+v", got)
	}
	code, out, errs := foundry(t, dir, "plan", "-json")
	p := decodePlan(t, out)
	if code != 0 || p.Capabilities[0].Status != plan.StatusRegistry {
		t.Fatalf("plan after the publish: exit %d %+v\n%s", code, p.Capabilities[0], errs)
	}
	s, err := registry.Open(backend + "/greeter")
	if err != nil {
		t.Fatal(err)
	}
	if vsas, pkgs := publishAttestations(t, s, p.Capabilities[0].Pinned.Digest); vsas != 1 || pkgs != 1 {
		t.Errorf("the manifest has %d verification summaries and %d packaging provenances, want one of each", vsas, pkgs)
	}
}

// tcpProxy forwards a loopback address to a registry, so that a test can make the registry
// unreachable at the address a project names, and reachable there again.
type tcpProxy struct {
	to, addr string
	mu       sync.Mutex
	l        net.Listener
	conns    []net.Conn
}

func (p *tcpProxy) start(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l, p.addr = l, addr
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every forwarded connection: nothing answers at addr.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
