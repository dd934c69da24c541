package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// runAction picks the action by name, passes it the rest, defaults when there is none, and
// turns an unknown action or a wrong count into one usage error naming the actions.
func TestRunAction(t *testing.T) {
	var ran []string
	record := func(name string) func([]string) int {
		return func(args []string) int {
			ran = append(ran, name+fmt.Sprint(args))
			return exitOK
		}
	}
	actions := []action{
		{"list", 0, "list takes no arguments", record("list")},
		{"show", 1, "show wants exactly one ID", record("show")},
		{"propose", 2, "propose wants an ID and a DIR", record("propose")},
	}
	for _, tc := range []struct {
		args    []string
		def     string
		code    int
		ran     string
		problem string
	}{
		{nil, "list", exitOK, "list[]", ""},
		{[]string{"show", "j1"}, "list", exitOK, "show[j1]", ""},
		{[]string{"propose", "j1", "dir"}, "", exitOK, "propose[j1 dir]", ""},
		{nil, "", exitUsage, "", "no action: want list, show or propose"},
		{[]string{"frob"}, "list", exitUsage, "", `unknown action "frob": want list, show or propose`},
		{[]string{"list", "x"}, "list", exitUsage, "", "list takes no arguments"},
		{[]string{"show"}, "list", exitUsage, "", "show wants exactly one ID"},
		{[]string{"propose", "j1"}, "list", exitUsage, "", "propose wants an ID and a DIR"},
	} {
		ran = nil
		var problem string
		usage := func(format string, a ...any) int { problem = fmt.Sprintf(format, a...); return exitUsage }
		code := runAction(usage, tc.args, tc.def, actions...)
		if code != tc.code || problem != tc.problem || strings.Join(ran, "") != tc.ran {
			t.Errorf("runAction(%q, default %q) = %d, usage %q, ran %q; want %d, %q, %q",
				tc.args, tc.def, code, problem, ran, tc.code, tc.problem, tc.ran)
		}
	}
}

func TestOrList(t *testing.T) {
	for names, want := range map[string]string{"": "", "a": "a", "a b": "a or b", "a b c": "a, b or c"} {
		if got := orList(strings.Fields(names)); got != want {
			t.Errorf("orList(%q) = %q, want %q", names, got, want)
		}
	}
}

// The cores of `foundry quarantine` run without the CLI: add creates the state, list shows
// the entry, remove lifts it and says so once.
func TestQuarantineCores(t *testing.T) {
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: os.Getenv}
	opt := quarantineOptions{Project: t.TempDir()}
	d := digest.FromBytes([]byte("withdrawn"))

	if code := quarantineList(env, opt); code != exitOK || !strings.Contains(out.String(), "nothing is quarantined (no project state") {
		t.Fatalf("list before any state: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := quarantineRemove(env, opt, d); code != exitOK || !strings.Contains(errb.String(), "was not quarantined (no project state") {
		t.Fatalf("remove before any state: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := quarantineAdd(env, opt, d, "a CVE"); code != exitOK || out.String() != fmt.Sprintf("quarantined %s: a CVE\n", d) {
		t.Fatalf("add: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	opt.JSON = true
	if code := quarantineList(env, opt); code != exitOK || !strings.Contains(out.String(), `"reason": "a CVE"`) || !strings.Contains(out.String(), string(d)) {
		t.Fatalf("list -json: %d %q", code, out.String())
	}
	out.Reset()
	opt.JSON = false
	if code := quarantineRemove(env, opt, d); code != exitOK || out.String() != fmt.Sprintf("lifted the quarantine of %s\n", d) {
		t.Fatalf("remove: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := quarantineRemove(env, opt, d); code != exitOK || out.Len() != 0 || !strings.HasSuffix(errb.String(), "was not quarantined\n") {
		t.Fatalf("remove again: %d %q %q", code, out.String(), errb.String())
	}
	if code := quarantineList(env, opt); code != exitOK || out.String() != "nothing is quarantined\n" {
		t.Fatalf("list after remove: %d %q", code, out.String())
	}
}
