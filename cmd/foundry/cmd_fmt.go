package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/foundry-build/foundry/internal/parallel"
)

func init() {
	register(&command{
		name:    "fmt",
		summary: "Rewrite *.hcl files in the canonical format",
		usage:   "foundry fmt [options] [DIR | FILE...]",
		help: `
Fmt rewrites the project's *.hcl files (DIR, default the current directory, or the FILEs
given) in the canonical layout: indentation, aligned equals signs, spacing. A file with a
syntax error is reported and left untouched. Files are replaced atomically.

Examples:
  foundry fmt
  foundry fmt -check        # in CI: exit 3 and list the files that need formatting

Exit codes: 0 success (or nothing to change with -check), 1 syntax errors or I/O failure,
2 usage error, 3 with -check when some file is not formatted.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			check := fs.Bool("check", false, "change nothing; exit 3 if any file needs formatting")
			return func(env *cliEnv, args []string) int {
				files, err := hclFiles(args)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry fmt: %v\n", err)
					return exitError
				}
				// Files are checked and formatted on every core, and nothing of a file is
				// kept but what is written or reported: holding every file's syntax tree
				// would make the collector mark them all, over and over.
				results := make([]fmtResult, len(files))
				parallel.Parts(len(files), 1, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						results[i] = formatFile(files[i])
					}
				})
				sources := map[string]*hcl.File{} // of the files with syntax errors, to show them
				var diags hcl.Diagnostics
				changed := 0
				for i, r := range results {
					f := files[i]
					if r.err != nil {
						fmt.Fprintf(env.stderr, "foundry fmt: %v\n", r.err)
						return exitError
					}
					if r.diags.HasErrors() {
						diags = append(diags, r.diags...)
						sources[f] = &hcl.File{Bytes: r.src}
						continue
					}
					if r.out == nil {
						continue
					}
					changed++
					fmt.Fprintln(env.stdout, f)
					if *check {
						continue
					}
					if err := replaceFile(f, r.out); err != nil {
						fmt.Fprintf(env.stderr, "foundry fmt: %v\n", err)
						return exitError
					}
				}
				if diags.HasErrors() {
					writeDiagnostics(env.stderr, sources, diags)
					return exitError
				}
				if *check && changed > 0 {
					fmt.Fprintf(env.stderr, "%d file(s) need formatting; run 'foundry fmt'.\n", changed)
					return exitDiffers
				}
				return exitOK
			}
		},
	})
}

// hclFiles expands the arguments of fmt into a sorted list of files.
// fmtResult is what formatting one file found: its formatted text when that differs from
// the file (nil when it does not), or its syntax errors with its text to show them.
type fmtResult struct {
	out   []byte
	src   []byte
	diags hcl.Diagnostics
	err   error
}

// formatFile reads, checks and formats one file. A file with a syntax error is not
// formatted: hclwrite formats whatever it is given, so hclsyntax checks it first.
func formatFile(f string) fmtResult {
	src, err := os.ReadFile(f)
	if err != nil {
		return fmtResult{err: err}
	}
	if _, d := hclsyntax.ParseConfig(src, f, hcl.InitialPos); d.HasErrors() {
		return fmtResult{src: src, diags: d}
	}
	if out := hclwrite.Format(src); !bytes.Equal(out, src) {
		return fmtResult{out: out}
	}
	return fmtResult{}
}

func hclFiles(args []string) ([]string, error) {
	if len(args) == 0 {
		args = []string{"."}
	}
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.hcl"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("no *.hcl files in %s", a)
		}
		out = append(out, m...)
	}
	sort.Strings(out)
	return out, nil
}

// replaceFile writes data to path atomically, keeping the file's mode.
func replaceFile(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fmt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
