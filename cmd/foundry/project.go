package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graphcache"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/internal/jsonindent"
	"github.com/foundry-build/foundry/lang"
)

// varFlags are the -var and -var-file flags shared by every command that loads a project.
type varFlags struct {
	vars     map[string]string
	varFiles stringList
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type varMap map[string]string

func (m varMap) String() string { return "" }
func (m varMap) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("-var wants NAME=VALUE, got %q", v)
	}
	m[name] = val
	return nil
}

func (v *varFlags) register(fs *flag.FlagSet) {
	v.vars = map[string]string{}
	fs.Var(varMap(v.vars), "var", "set a variable: `NAME=VALUE` (repeatable; wins over -var-file)")
	fs.Var(&v.varFiles, "var-file", "read variables from an HCL `FILE` of NAME = VALUE lines (repeatable)")
}

// selectFlags are -target and, where a command runs steps, -replace.
type selectFlags struct {
	targets, replace stringList
}

func (s *selectFlags) register(fs *flag.FlagSet, replace bool) {
	fs.Var(&s.targets, "target", "restrict to `ADDRESS` and what it needs: a node, a block with for_each or count (all its instances), or a module (repeatable)")
	if replace {
		fs.Var(&s.replace, "replace", "run step `ADDRESS` again even if its result is cached; what uses it follows the usual cache rules (repeatable)")
	}
}

func (s *selectFlags) selection() plan.Selection {
	return plan.Selection{Targets: s.targets, Replace: s.replace}
}

// usageError reports a usage mistake of foundry CMD, with where to read how to use it, and
// returns the usage exit code.
func usageError(env *cliEnv, cmd, format string, a ...any) int {
	fmt.Fprintf(env.stderr, "foundry %s: %s\nRun 'foundry %s -help' for usage.\n", cmd, fmt.Sprintf(format, a...), cmd)
	return exitUsage
}

// projectDir returns the project directory from the positional arguments (default ".").
func projectDir(env *cliEnv, cmd string, args []string) (string, bool) {
	switch len(args) {
	case 0:
		return ".", true
	case 1:
		return args[0], true
	}
	usageError(env, cmd, "too many arguments: %s", strings.Join(args, " "))
	return "", false
}

// loadGraph loads and compiles the project in dir, printing diagnostics. It returns nil when
// there were errors.
func loadGraph(env *cliEnv, dir string, v *varFlags, jsonOut bool) (*graph.Graph, hcl.Diagnostics) {
	g, diags, saveStat := loadGraphUnsaved(env, dir, v, jsonOut)
	saveStat()
	return g, diags
}

// loadGraphUnsaved is loadGraph without writing the stat cache or the graph cache
// (engine/graphcache): the caller calls saveStat once it has decided to write in the state
// directory at all (apply of a stale saved plan writes nothing). saveStat writes them only
// if the state directory exists by then: commands that only read a project never create
// it, and the first apply of a project, which creates it, saves what its load learnt.
func loadGraphUnsaved(env *cliEnv, dir string, v *varFlags, jsonOut bool) (g *graph.Graph, diags hcl.Diagnostics, saveStat func()) {
	// Input digests are remembered by stat in the project's state directory.
	state := filepath.Join(dir, workspace.StateDir)
	stat := digest.OpenStatCache(filepath.Join(state, "stat-cache"))
	commit := func() error { return nil }
	saveStat = func() {
		if st, err := os.Stat(state); err != nil || !st.IsDir() {
			return
		}
		if err := commit(); err != nil {
			fmt.Fprintf(env.stderr, "Warning: %v (the project will be loaded again next time)\n", err)
		}
		if err := stat.Save(); err != nil {
			fmt.Fprintf(env.stderr, "Warning: %v (input files will be hashed again next time)\n", err)
		}
	}
	budget, diags := evalBudget(env)
	if diags.HasErrors() {
		if !jsonOut {
			writeDiagnostics(env.stderr, nil, diags)
		}
		return nil, diags, saveStat
	}
	// Compiled graphs are cached beside the stat cache.
	var trace io.Writer
	if debugging(env, "graph-cache") {
		trace = env.stderr
	}
	var cfg *lang.Config
	g, cfg, diags, commit = graphcache.Load(dir, lang.Options{Vars: v.vars, VarFiles: v.varFiles, StatCache: stat, Budget: budget},
		filepath.Join(state, "graph-cache"), trace)
	if debugging(env, "stat-cache") {
		hits, misses := stat.Counts()
		fmt.Fprintf(env.stderr, "stat cache: %d remembered, %d hashed\n", hits, misses)
	}
	if len(diags) > 0 && !jsonOut {
		var files map[string]*hcl.File
		if cfg != nil {
			files = cfg.Files
		}
		writeDiagnostics(env.stderr, files, diags)
	}
	if diags.HasErrors() {
		return nil, diags, saveStat
	}
	return g, diags, saveStat
}

// debugging reports whether FOUNDRY_DEBUG, a comma-separated list, names topic
// (spec/cli.md).
func debugging(env *cliEnv, topic string) bool {
	for _, t := range strings.Split(env.getenv("FOUNDRY_DEBUG"), ",") {
		if strings.TrimSpace(t) == topic {
			return true
		}
	}
	return false
}

// evalBudget is the evaluation budget the operator set in the environment (lang.Budget): a
// limit left unset takes lang.DefaultBudget's. Only the operator sets it; a project's files
// cannot.
func evalBudget(env *cliEnv) (lang.Budget, hcl.Diagnostics) {
	var b lang.Budget
	var diags hcl.Diagnostics
	invalid := func(name, val, want string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid evaluation budget",
			Detail: fmt.Sprintf("%s=%s: want %s.", name, val, want)})
	}
	if s := env.getenv(lang.EnvMaxValues); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			invalid(lang.EnvMaxValues, s, "a positive number of values, for example 5000000")
		}
		b.MaxValues = n
	}
	if s := env.getenv(lang.EnvMaxBytes); s != "" {
		n, err := lang.ParseSize(s)
		if err != nil {
			invalid(lang.EnvMaxBytes, s, "a size, for example 512MiB")
		}
		b.MaxBytes = n
	}
	if s := env.getenv(lang.EnvTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			invalid(lang.EnvTimeout, s, "a positive duration, for example 5m")
		}
		b.Timeout = d
	}
	return b, diags
}

// writeDiagnostics renders diagnostics with file:line:column and a source snippet.
func writeDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) {
	dw := hcl.NewDiagnosticTextWriter(w, files, 100, false)
	for _, d := range diags {
		dw.WriteDiagnostic(d)
	}
	errs := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs++
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "%d error(s).\n", errs)
	}
}

// jsonDiagnostic is the JSON form of a diagnostic (spec/cli.md).
type jsonDiagnostic struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *jsonRange `json:"range,omitempty"`
}

type jsonRange struct {
	File  string  `json:"file"`
	Start jsonPos `json:"start"`
	End   jsonPos `json:"end"`
}

type jsonPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

func toJSONDiagnostics(diags hcl.Diagnostics) []jsonDiagnostic {
	out := make([]jsonDiagnostic, 0, len(diags))
	for _, d := range diags {
		jd := jsonDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if d.Subject != nil {
			r := d.Subject
			jd.Range = &jsonRange{File: r.Filename,
				Start: jsonPos{r.Start.Line, r.Start.Column, r.Start.Byte},
				End:   jsonPos{r.End.Line, r.End.Column, r.End.Byte}}
		}
		out = append(out, jd)
	}
	return out
}

func writeJSON(w io.Writer, v any) {
	_ = jsonindent.Encode(w, v, "  ")
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
