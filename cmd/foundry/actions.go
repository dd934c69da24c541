package main

import "strings"

// An action is one subcommand of a command that has several: `foundry jobs show`,
// `foundry effects resolve`, `foundry quarantine add`, …
type action struct {
	name  string
	nargs int    // how many positional arguments it takes, exactly
	bad   string // the usage error when it is given another number of them
	// run checks the command's flags as the action reads them and does it.
	run func(args []string) int
}

// runAction runs the action that args[0] names with the rest of args. With no args it runs
// def, or, when def is "", it is a usage error: the command has no default. An unknown action
// and a wrong number of arguments are usage errors (usage prints one and returns exit 2).
func runAction(usage func(format string, a ...any) int, args []string, def string, actions ...action) int {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = a.name
	}
	want := "want " + orList(names)
	if len(args) == 0 {
		if def == "" {
			return usage("no action: %s", want)
		}
		args = []string{def}
	}
	name, rest := args[0], args[1:]
	for _, a := range actions {
		if a.name == name {
			if len(rest) != a.nargs {
				return usage("%s", a.bad)
			}
			return a.run(rest)
		}
	}
	return usage("unknown action %q: %s", name, want)
}

// orList joins names as prose: "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
