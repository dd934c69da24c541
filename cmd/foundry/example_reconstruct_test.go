package main

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/plan"
)

// progressEvent is the part of an apply's -progress json event these tests read.
type progressEvent struct {
	Type, Node, Recipe, Suite, Message, Ref string
}

// progressEvents are the json events of an apply's stderr, in order.
func progressEvents(stderr string) []progressEvent {
	var evs []progressEvent
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e progressEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type != "" {
			evs = append(evs, e)
		}
	}
	return evs
}

// ofType are the events of evs of type typ.
func ofType(evs []progressEvent, typ string) []progressEvent {
	var out []progressEvent
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// examples/reconstruct end to end. In one apply, the builder's first proposal (a sort as
// text) passes the dev cases, fails the sealed suite on sealed/tens.json and is rejected;
// its second, made from that counterexample, is admitted and published, and step.sort,
// which waits for it, sorts numerically. Then reuse/, the same contract with no recipe and
// no reconstruct block, pins that version from the shared registry under the first
// project's key: no builder runs and nothing is evaluated.
func TestExampleReconstruct(t *testing.T) {
	needSandbox(t)
	dir := copyExample(t, "reconstruct")

	first := apply(t, dir, nil)
	if first.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", first.code, first.stdout, first.stderr)
	}
	evs := progressEvents(first.stderr)
	if rounds := ofType(evs, "reconstruct_round"); len(rounds) != 2 {
		t.Errorf("rounds: %+v", rounds)
	}
	rej := ofType(evs, "candidate_rejected")
	if len(rej) != 1 || rej[0].Recipe != "reconstruct round 1" || rej[0].Suite != "sealed" ||
		!strings.Contains(rej[0].Message, "counterexample sealed/tens.json") {
		t.Errorf("rejections: %+v", rej)
	}
	adm := ofType(evs, "capability_admitted")
	if len(adm) != 1 || adm[0].Recipe != "reconstruct round 2" || adm[0].Ref == "" {
		t.Fatalf("admissions: %+v", adm)
	}
	if n := strings.Count(strings.Join(first.executed, "\n"), "capability.sorter.reconstruct.builder"); n != 2 || !slices.Contains(first.executed, "step.sort") {
		t.Errorf("executed: %v", first.executed)
	}
	if code, out, _ := foundry(t, dir, "output", "step.sort", "/out/sorted.json"); code != 0 || strings.TrimSpace(out) != "[3,3,7,12,100]" {
		t.Errorf("step.sort made %q (exit %d)", out, code)
	}
	// Round 2's builder was shown round 1's counterexample, and nothing else sealed.
	if code, out, _ := foundry(t, dir, "logs", "-stream", "stdout", "capability.sorter.reconstruct.builder"); code != 0 ||
		!strings.Contains(out, `"case": "sealed/tens.json"`) || strings.Contains(out, "duplicates") {
		t.Errorf("builder log (exit %d):\n%s", code, out)
	}

	reuse := filepath.Join(dir, "reuse")
	trust := []string{"-trust-key", filepath.Join("..", ".foundry", "keys", "signing.pub")}
	second := apply(t, reuse, nil, trust...)
	if second.code != 0 {
		t.Fatalf("reuse apply: exit %d\n%s\n%s", second.code, second.stdout, second.stderr)
	}
	evs = progressEvents(second.stderr)
	if !sameSet(second.executed, "step.sort") || len(ofType(evs, "capability_pinned")) != 1 {
		t.Errorf("reuse apply: executed %v\n%s", second.executed, second.stderr)
	}
	for _, typ := range []string{"reconstruct_round", "suite_evaluated", "candidate_rejected", "capability_admitted"} {
		if e := ofType(evs, typ); len(e) != 0 {
			t.Errorf("reuse apply: %s %+v", typ, e)
		}
	}
	if code, out, _ := foundry(t, reuse, "output", "step.sort", "/out/sorted.json"); code != 0 || strings.TrimSpace(out) != "[4,30,200,1000]" {
		t.Errorf("reuse step.sort made %q (exit %d)", out, code)
	}

	// Its report shows the chain of the version pinned, verified with the first project's
	// key, and not verified without it.
	t.Run("report", func(t *testing.T) { checkPinnedChain(t, reuse, "capability.sorter", adm[0].Ref, trust[1]) })

	// Its plan pins what the first project admitted, and has nothing to run or build.
	code, out, errs := foundry(t, reuse, append([]string{"plan", "-json"}, trust...)...)
	if code != 0 {
		t.Fatalf("reuse plan: exit %d\n%s", code, errs)
	}
	p := decodePlan(t, out)
	if c := p.Capabilities[0]; c.Status != plan.StatusRegistry || c.Pinned == nil || c.Pinned.Ref != adm[0].Ref ||
		p.Summary.Run+p.Summary.Build+p.Summary.Reconstruct != 0 {
		t.Errorf("reuse plan: %+v, pinned %+v, summary %+v", c, c.Pinned, p.Summary)
	}
	// Without the first project's key, nothing in that registry verifies.
	code, out, _ = foundry(t, reuse, "plan", "-json")
	if p := decodePlan(t, out); code != 0 || p.Capabilities[0].Status != plan.StatusMissing {
		t.Errorf("reuse plan without -trust-key: exit %d, %+v", code, p.Capabilities[0])
	}
}
