package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func init() {
	register(&command{
		name:    "init",
		summary: "Create a starter project",
		usage:   "foundry init [options] [DIR]",
		help: `
Init writes a small working project into DIR (default: the current directory): a busybox
seed made from the host's /bin/busybox and a two-step pipeline, plus a .gitignore for the
.foundry state directory. It refuses to touch a directory that already has *.hcl files.

Then:
  foundry validate
  foundry plan
  foundry apply

Exit codes: 0 success, 1 the directory already has a project or cannot be written.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			name := fs.String("name", "", "project `NAME` (default: the directory's name)")
			return func(env *cliEnv, args []string) int {
				dir, ok := projectDir(env, "init", args)
				if !ok {
					return exitUsage
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					fmt.Fprintf(env.stderr, "foundry init: %v\n", err)
					return exitError
				}
				if m, _ := filepath.Glob(filepath.Join(dir, "*.hcl")); len(m) > 0 {
					fmt.Fprintf(env.stderr, "foundry init: %s already has configuration files (%s); nothing written.\n", dir, filepath.Base(m[0]))
					return exitError
				}
				n := *name
				if n == "" {
					abs, _ := filepath.Abs(dir)
					n = filepath.Base(abs)
				}
				files := map[string]string{
					"main.hcl":   fmt.Sprintf(starterHCL, n),
					".gitignore": ".foundry/\n",
				}
				for _, f := range sortedNames(files) {
					p := filepath.Join(dir, f)
					if fileExists(p) {
						continue
					}
					if err := os.WriteFile(p, []byte(files[f]), 0o644); err != nil {
						fmt.Fprintf(env.stderr, "foundry init: %v\n", err)
						return exitError
					}
					fmt.Fprintf(env.stdout, "wrote %s\n", p)
				}
				fmt.Fprintf(env.stdout, "\nNext: cd %s && foundry plan\n", dir)
				return exitOK
			}
		},
	})
}

const starterHCL = `project %q {
  platform = "linux/amd64"
}

variable "greeting" {
  type    = string
  default = "hello"
}

# A seed is hashed, never built: here, the host's static busybox and its applet links.
seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/echo" = "busybox", "/bin/tr" = "busybox", "/bin/cat" = "busybox" }
  }
  env = { PATH = "/bin" }
}

# Each step runs in a sandbox: read-only root, writable /out and /tmp, no network.
step "greet" {
  image   = seed.busybox
  run     = ["sh", "-c", "echo ${var.greeting} > /out/greeting.txt"]
  outputs = ["/out/greeting.txt"]
}

step "shout" {
  image   = seed.busybox
  mounts  = { "/in/greeting.txt" = step.greet.output["/out/greeting.txt"] }
  run     = ["sh", "-c", "tr a-z A-Z < /in/greeting.txt > /out/shout.txt"]
  outputs = ["/out/shout.txt"]
  limits {
    memory = "64MiB"
    time   = "30s"
  }
}
`
