// Command foundry is the CLI: thin wrappers over lang, engine, executors, provenance and
// registry. Each subcommand lives in its own cmd_<name>.go file and registers itself in
// commands (see register).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"

	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/internal/suggest"
)

// Exit codes, documented in spec/cli.md.
const (
	exitOK       = 0 // success
	exitError    = 1 // the command ran and failed: bad configuration, failed step, failed check
	exitUsage    = 2 // bad command line
	exitDiffers  = 3 // a check found a difference: fmt -check, plan -detailed-exitcode with changes
	exitInternal = 4 // an internal error (a bug): please report it
)

// command is one subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	usage   string // "foundry plan [options] [DIR]"
	help    string // paragraphs that teach: what it does, examples, exit codes
	// flags declares the command's flags on fs and returns the function that runs it.
	// run gets the remaining positional arguments and returns an exit code.
	setup func(fs *flag.FlagSet) func(env *cliEnv, args []string) int
}

// cliEnv is what a command may touch: streams and the process environment, so that tests can
// drive the CLI in-process.
type cliEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() {
	env := &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(profiled(env, func() int { return dispatch(env, os.Args[1:]) }))
}

// profiled runs f under a CPU profile written to $FOUNDRY_CPUPROFILE, if set: how to see
// where a slow plan or apply spends its time (go tool pprof FILE).
func profiled(env *cliEnv, f func() int) int {
	path := env.getenv("FOUNDRY_CPUPROFILE")
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(out)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "Error: FOUNDRY_CPUPROFILE: %v\n", err)
		return exitUsage
	}
	code := f()
	pprof.StopCPUProfile()
	if err := out.Close(); err != nil {
		fmt.Fprintf(env.stderr, "Error: FOUNDRY_CPUPROFILE: %v\n", err)
	}
	return code
}

// dispatch hands args to a subcommand and returns the process exit code. A panic in the
// command (or one an apply carries back from a step's goroutine, run.Panic) is a bug: it
// exits exitInternal with one line, not Go's exit 2 and trace, which a script would take
// for a usage error.
func dispatch(env *cliEnv, args []string) (code int) {
	who := "foundry" // names the command in the panic report, once it is known
	defer func() {
		if v := recover(); v != nil {
			code = reportPanic(env, who, v, debug.Stack())
		}
	}()
	if len(args) == 0 {
		printTopUsage(env.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				printCommandHelp(env.stdout, c)
				return exitOK
			}
		}
		printTopUsage(env.stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintln(env.stdout, "foundry", version)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(env.stderr, "foundry: unknown command %q%s\nRun 'foundry help' for the list of commands.\n", name, suggestCommand(name))
		return exitUsage
	}
	who = "foundry " + c.name
	fs := flag.NewFlagSet(who, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFn := c.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(env.stdout, c)
			return exitOK
		}
		return usageError(env, c.name, "%v", err)
	}
	return runFn(env, fs.Args())
}

var version = "dev"

// reportURL is where bugs are reported.
const reportURL = "https://github.com/foundry-build/foundry/issues"

// reportPanic says that the command hit a bug: one line naming the panic value, one saying
// where to report it; the stack only when FOUNDRY_DEBUG is set (spec/cli.md). stack is
// where the panic was recovered; a panic carried from another goroutine brings its own.
func reportPanic(env *cliEnv, name string, v any, stack []byte) int {
	where := ""
	if p, ok := v.(*run.Panic); ok {
		v, stack = p.Value, p.Stack
		where = " while settling " + p.Node
	}
	fmt.Fprintf(env.stderr, "%s: internal error: panic%s: %v\n", name, where, v)
	if env.getenv("FOUNDRY_DEBUG") != "" {
		fmt.Fprintf(env.stderr, "This is a bug in foundry %s; please report it, with this stack, at %s\n\n%s", version, reportURL, stack)
	} else {
		fmt.Fprintf(env.stderr, "This is a bug in foundry %s; please report it at %s (run again with FOUNDRY_DEBUG=1 for the stack to include).\n", version, reportURL)
	}
	return exitInternal
}

func printTopUsage(w io.Writer) {
	fmt.Fprint(w, `Foundry builds software that must be proven: HCL recipes and capability contracts compile into
a content-addressed graph; steps run in sandboxes; results carry signed provenance.

Usage: foundry <command> [options] [args]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Run 'foundry <command> -help' for a command's options and examples.
Exit codes: 0 success, 1 failure, 2 usage error, 3 differences found (fmt -check,
plan -detailed-exitcode), 4 internal error.
`)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(w, "\nOptions:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// suggestCommand is ` (did you mean "NAME"?)` for the command closest to name, or "".
func suggestCommand(name string) string {
	if best := suggest.Closest(name, slices.Collect(maps.Keys(commands))); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
