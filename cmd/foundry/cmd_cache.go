package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/volume"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

func init() {
	register(&command{
		name:    "cache",
		summary: "List and delete the project's cache volumes",
		usage:   "foundry cache ls [-C DIR] [-json] | prune [-all | -name NAME | -older-than AGE | -max-size BYTES] [-dry-run] [-C DIR] [-json]",
		help: `
Cache shows and deletes the cache volumes of the project at -C (default: the current
directory): the writable filesystems steps mount with caches = { PATH = NAME }
(spec/language.md §9b), kept in .foundry/caches, one per cache name, trust domain, image,
platform and bound: each an ext4 image of its max_size, mounted while a step uses it.

  ls      each volume: its name, trust domain, image, platform, size (what its images take
          on the host's disk), bound (max_size, per instance), private instances, when it
          was last used, and whether a step is using it now
  prune   delete volumes: every one (-all), those of a cache name (-name), those not used
          for longer than -older-than, or the least recently used until the rest fit in
          -max-size bytes. A volume a step is using is never deleted: it is reported busy.

A cache is never an input of a step's cache key: deleting one only makes the next steps
that mount it start cold. 'foundry gc' bounds the volumes too (-cache-max-size,
-cache-max-age).

Examples:
  foundry cache ls
  foundry cache prune -name go-build
  foundry cache prune -older-than 168h -json

Exit codes: 0 done, 1 the volumes could not be read or deleted, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			project := fs.String("C", ".", "project `DIR`")
			jsonOut := fs.Bool("json", false, "print JSON")
			all := fs.Bool("all", false, "prune: every volume")
			name := fs.String("name", "", "prune: the volumes of cache `NAME`")
			olderThan := fs.Duration("older-than", 0, "prune: volumes not used for longer than `AGE`")
			maxSize := fs.Int64("max-size", 0, "prune: the least recently used until the rest fit in `BYTES`")
			dry := fs.Bool("dry-run", false, "prune: report what would be deleted, delete nothing")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "cache", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				if len(args) != 1 {
					return usage("want one action: ls or prune")
				}
				st := &volume.Store{Dir: filepath.Join(*project, workspace.StateDir, "caches")}
				switch args[0] {
				case "ls":
					list, err := st.List()
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry cache: %v\n", err)
						return exitError
					}
					if *jsonOut {
						if list == nil {
							list = []volume.Info{}
						}
						writeJSON(env.stdout, list)
						return exitOK
					}
					if len(list) == 0 {
						fmt.Fprintln(env.stdout, "no cache volumes")
						return exitOK
					}
					tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tDOMAIN\tIMAGE\tPLATFORM\tSIZE\tMAX SIZE\tINSTANCES\tLAST USED\tIN USE")
					for _, in := range list {
						inUse := ""
						if in.InUse {
							inUse = "yes"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", in.Name, in.Domain, digest.Digest(in.Image).Short(), in.Platform,
							humanBytes(in.Size), lang.FormatSize(in.MaxSize), in.Instances, in.Used.Local().Format(time.DateTime), inUse)
					}
					tw.Flush()
					return exitOK
				case "prune":
					if !*all && *name == "" && *olderThan <= 0 && *maxSize <= 0 {
						return usage("prune needs -all, -name NAME, -older-than AGE or -max-size BYTES")
					}
					res, err := st.Prune(volume.PruneOptions{All: *all, Name: *name, OlderThan: *olderThan, MaxBytes: *maxSize, DryRun: *dry})
					if err != nil {
						fmt.Fprintf(env.stderr, "foundry cache: %v\n", err)
						return exitError
					}
					if *jsonOut {
						if res.Removed == nil {
							res.Removed = []volume.Info{}
						}
						if res.Busy == nil {
							res.Busy = []volume.Info{}
						}
						writeJSON(env.stdout, res)
						return exitOK
					}
					verb := "deleted"
					if *dry {
						verb = "would delete"
					}
					for _, in := range res.Removed {
						fmt.Fprintf(env.stdout, "%s cache %s (%s, %s): %s\n", verb, in.Name, in.Domain, digest.Digest(in.Image).Short(), humanBytes(in.Size))
					}
					for _, in := range res.Busy {
						fmt.Fprintf(env.stdout, "kept cache %s (%s, %s): a step is using it\n", in.Name, in.Domain, digest.Digest(in.Image).Short())
					}
					fmt.Fprintf(env.stdout, "%s %d cache volumes, %s\n", verb, len(res.Removed), humanBytes(res.Freed))
					return exitOK
				default:
					return usage("unknown action %q: want ls or prune", args[0])
				}
			}
		},
	})
}
