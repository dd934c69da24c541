// Package architecture holds the test of ARCHITECTURE.md's import rules: every "never" and
// "only" of its rule lines, against the imports `go list -deps` reports.
package architecture

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/foundry-build/foundry/"

// A rule says what one package may import, directly or through another package.
type rule struct {
	line  int    // in ARCHITECTURE.md
	pkg   string // relative to the module: engine/plan
	never bool   // names are forbidden; else only names (and what they import) are allowed
	names []string
}

var (
	// engine/plan        → evaluate, admit, fetch   (never run or reconstruct)
	// engine/outbox      → state only
	arrowRule = regexp.MustCompile(`^(\S+)\s+→ ([^(]*?)\s*(?:\((never [^:;)]*)|$)`)
	// lang               never engine/...
	plainRule = regexp.MustCompile(`^(\S+)\s+((?:never|only) .*?)\s*$`)
)

// readRules reads the rule lines of ARCHITECTURE.md's code blocks.
func readRules(t *testing.T, path string) []rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	inBlock := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		var pkg, text string
		if m := arrowRule.FindStringSubmatch(line); m != nil {
			pkg, text = m[1], m[3]
			if list, ok := strings.CutSuffix(m[2], " only"); ok && text == "" {
				text = "only " + list
			}
		} else if m := plainRule.FindStringSubmatch(line); m != nil {
			pkg, text = m[1], m[2]
		}
		if text == "" {
			continue
		}
		kind, list, _ := strings.Cut(text, " ")
		r := rule{line: n, pkg: pkg, never: kind == "never"}
		if list != "nothing" {
			r.names = strings.FieldsFunc(strings.NewReplacer(" or ", ",", " and ", ",").Replace(list), func(c rune) bool { return c == ',' || c == ' ' })
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rules
}

// deps is every package of the module with the module's packages it imports, directly or not.
func deps(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		var ours []string
		for _, d := range p.Deps {
			if rel, ok := strings.CutPrefix(d, module); ok {
				ours = append(ours, rel)
			}
		}
		all[strings.TrimPrefix(p.ImportPath, module)] = ours
	}
	return all
}

// resolve returns the package (or pattern) a name of r stands for: name itself, or, in a
// rule of an engine package, engine/name when that exists; name/... stands for name and
// everything under it.
func (r rule) resolve(t *testing.T, name string, all map[string][]string) string {
	t.Helper()
	if base, ok := strings.CutSuffix(name, "/..."); ok {
		return base + "/..."
	}
	if strings.HasPrefix(r.pkg, "engine/") {
		if _, ok := all["engine/"+name]; ok {
			return "engine/" + name
		}
	}
	if _, ok := all[name]; !ok {
		t.Errorf("ARCHITECTURE.md:%d: %s names %q, which is no package of the module", r.line, r.pkg, name)
	}
	return name
}

func covers(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// check returns the imports of pkg (given its module dependencies) that break r.
func (r rule) check(t *testing.T, all map[string][]string) []string {
	t.Helper()
	var patterns []string
	for _, n := range r.names {
		patterns = append(patterns, r.resolve(t, n, all))
	}
	allowed := map[string]bool{}
	if !r.never {
		for _, p := range patterns {
			allowed[p] = true
			for _, d := range all[p] {
				allowed[d] = true
			}
		}
	}
	var bad []string
	for _, d := range all[r.pkg] {
		if r.never {
			if slices.ContainsFunc(patterns, func(p string) bool { return covers(p, d) }) {
				bad = append(bad, d)
			}
		} else if !allowed[d] && !strings.HasPrefix(d, "internal/") {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestArchitectureRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rules := readRules(t, filepath.Join(root, "ARCHITECTURE.md"))
	all := deps(t, root)
	// The file has the engine's twelve rules and the base packages' seven: a change of
	// syntax that hides them from this test must fail it, not pass it.
	if len(rules) < 19 {
		t.Fatalf("read %d rules from ARCHITECTURE.md, want at least 19: %+v", len(rules), rules)
	}
	for _, r := range rules {
		if _, ok := all[r.pkg]; !ok {
			t.Errorf("ARCHITECTURE.md:%d: no package %s in the module", r.line, r.pkg)
			continue
		}
		if bad := r.check(t, all); len(bad) > 0 {
			kind := "only"
			if r.never {
				kind = "never"
			}
			t.Errorf("ARCHITECTURE.md:%d: %s imports %s (%s %s)", r.line, r.pkg, strings.Join(bad, ", "), kind, strings.Join(r.names, ", "))
		}
	}
}
