package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"
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
				parser := hclparse.NewParser()
				var diags hcl.Diagnostics
				changed := 0
				for _, f := range files {
					src, err := os.ReadFile(f)
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry fmt: %v\n", err)
						return exitError
					}
					if _, d := parser.ParseHCL(src, f); d.HasErrors() {
						diags = append(diags, d...)
						continue
					}
					out := hclwrite.Format(src)
					if bytes.Equal(out, src) {
						continue
					}
					changed++
					fmt.Fprintln(env.stdout, f)
					if *check {
						continue
					}
					if err := replaceFile(f, out); err != nil {
						fmt.Fprintf(env.stderr, "foundry fmt: %v\n", err)
						return exitError
					}
				}
				if diags.HasErrors() {
					writeDiagnostics(env.stderr, parser.Files(), diags)
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
