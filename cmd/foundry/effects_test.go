package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/admit"
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
