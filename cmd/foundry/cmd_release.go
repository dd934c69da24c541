package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/lang"
)

func init() {
	register(&command{
		name:    "release",
		summary: "List products' release channels and roll one back to an earlier release",
		usage:   "foundry release [list] [-C DIR] [-json] | rollback PRODUCT [-to DIGEST] [-dest DEST] [-trust-key PEM]... [-C DIR] [-json]",
		help: `
Release shows the release channels of the project at -C (default: the current directory).
Each successful delivery of a product records its release (the digest of its release.json)
and moves the product's channel at that destination to it, when the release is new there
(spec/grants.md, "Release channels"). In a dir: destination the channel is also the link
DEST/current -> <hex>, and the service started from DEST/current keeps its data in
current/data: each release has its own data/ directory, a copy of the data of the release
the channel left, made when the channel moved to it.

  list (the default)   every channel, where it points, and its releases oldest first
  rollback PRODUCT     re-point PRODUCT's channel to the release before the one it points at,
                       or to -to DIGEST (sha256:<hex>, or a prefix of the hex only it has);
                       -dest picks the destination when the product has several

Before it moves anything, rollback checks the target release as foundry verify does, with
the project's signing key (.foundry/keys/signing.pub) and each -trust-key (for a release
signed with -signing-key or FOUNDRY_SIGNING_KEY): its release.json hashes to the
recorded digest, its delivery receipt binds the files' tree recomputed now and the
manifest, and every acceptance envelope the receipt names verifies. A target that does not
verify (a changed file, manifest, receipt or evidence) is refused and nothing changes.
Then DEST/current is re-pointed by a rename, and the channel row after it. The target's
data is its own data/ directory, as it was when the channel left it: the data of the
release rolled back from stays in that release's data/, untouched. Restart the service
from DEST/current to serve the earlier files and data.

Rollback is for dir: destinations; an oci-layout: or oci: channel is listed but not rolled back.
An apply that delivers a release the destination already has does not move the channel, so
a rollback stays until a new release is delivered.

Examples:
  foundry release
  foundry release -json
  foundry release rollback app
  foundry release rollback product.app -to sha256:3c1f...
  foundry release rollback app -trust-key release-signer.pub

Exit codes: 0 done, 1 no such product, channel or release, the target does not verify, or
the state could not be read or written, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			project := fs.String("C", ".", "project `DIR`")
			to := fs.String("to", "", "rollback: the release `DIGEST` to re-point to (default: the one before the current)")
			dest := fs.String("dest", "", "rollback: the destination `DEST` of the channel, when the product has several")
			jsonOut := fs.Bool("json", false, "print JSON")
			var trust stringList
			fs.Var(&trust, "trust-key", "rollback: also trust this public key `PEM` for the target's receipt and evidence (repeatable; the project's own key is always trusted)")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "release", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				return runAction(usage, args, "list",
					action{"list", 0, "list takes no arguments (the project is -C DIR)", func([]string) int {
						if *to != "" || *dest != "" || len(trust) > 0 {
							return usage("-to, -dest and -trust-key are for rollback")
						}
						return listReleases(env, *project, *jsonOut)
					}},
					action{"rollback", 1, "rollback wants exactly one PRODUCT", func(args []string) int {
						return rollbackRelease(env, *project, args[0], *to, *dest, trust, *jsonOut)
					}})
			}
		},
	})
}

type releaseJSON struct {
	Seq       int64     `json:"seq"`
	Release   string    `json:"release"`
	Location  string    `json:"location"`
	Receipt   string    `json:"receipt"`
	Delivered time.Time `json:"delivered"`
	Current   bool      `json:"current"`
}

type channelJSON struct {
	Product     string        `json:"product"`
	Destination string        `json:"destination"`
	Release     string        `json:"release"`
	Moved       time.Time     `json:"moved"`
	Reason      string        `json:"reason"`
	Releases    []releaseJSON `json:"releases"`
}

// channelsOf reads the channels with their releases.
func channelsOf(ctx context.Context, db *state.DB) ([]channelJSON, error) {
	chs, err := db.Channels(ctx)
	if err != nil {
		return nil, err
	}
	rels, err := db.Releases(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]channelJSON, 0, len(chs))
	for _, c := range chs {
		j := channelJSON{Product: c.Product, Destination: c.Destination, Release: c.Release, Moved: c.Moved.UTC(), Reason: c.Reason, Releases: []releaseJSON{}}
		for _, r := range rels {
			if r.Product == c.Product && r.Destination == c.Destination {
				j.Releases = append(j.Releases, releaseJSON{Seq: r.Seq, Release: r.Release, Location: r.Location, Receipt: r.Receipt,
					Delivered: r.Delivered.UTC(), Current: r.Release == c.Release})
			}
		}
		out = append(out, j)
	}
	return out, nil
}

func listReleases(env *cliEnv, dir string, jsonOut bool) int {
	failed := func(err error) int { fmt.Fprintf(env.stderr, "foundry release: %v\n", err); return exitError }
	db, ok := openEffects(env, dir)
	if !ok {
		return exitError
	}
	chs := []channelJSON{}
	if db != nil {
		defer db.Close()
		var err error
		if chs, err = channelsOf(context.Background(), db); err != nil {
			return failed(err)
		}
	}
	if jsonOut {
		writeJSON(env.stdout, map[string]any{"channels": chs})
		return exitOK
	}
	if len(chs) == 0 {
		fmt.Fprintln(env.stdout, "No release is recorded: no product was delivered.")
		return exitOK
	}
	for i, c := range chs {
		if i > 0 {
			fmt.Fprintln(env.stdout)
		}
		fmt.Fprintf(env.stdout, "%s at %s: %s (%s, %s)\n", c.Product, c.Destination, c.Release, c.Reason, c.Moved.Format(time.RFC3339))
		for _, r := range c.Releases {
			mark := " "
			if r.Current {
				mark = "*"
			}
			fmt.Fprintf(env.stdout, "  %s %d  %s  %s  %s\n", mark, r.Seq, r.Release, r.Delivered.Format(time.RFC3339), r.Location)
		}
	}
	return exitOK
}

// rollbackRelease re-points product's channel to target (or the release before the current
// one) once the target verifies with the project's key or one of trust (-trust-key files).
func rollbackRelease(env *cliEnv, dir, product, to, dest string, trust []string, jsonOut bool) int {
	ctx := context.Background()
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry release rollback: "+format+"\n", a...)
		return exitError
	}
	if !strings.HasPrefix(product, "product.") {
		product = "product." + product
	}
	db, ok := openEffects(env, dir)
	if !ok {
		return exitError
	}
	if db == nil {
		return failed("no project state in %s: nothing was delivered", dir)
	}
	defer db.Close()
	chs, err := channelsOf(ctx, db)
	if err != nil {
		return failed("%v", err)
	}
	var mine []channelJSON
	for _, c := range chs {
		if c.Product == product && (dest == "" || c.Destination == dest) {
			mine = append(mine, c)
		}
	}
	switch {
	case len(mine) == 0 && dest != "":
		return failed("%s has no release channel at %s", product, dest)
	case len(mine) == 0:
		return failed("%s has no release channel: it was never delivered", product)
	case len(mine) > 1:
		return failed("%s has channels at %d destinations; pick one with -dest", product, len(mine))
	}
	ch := mine[0]
	var cur, target *releaseJSON
	for i := range ch.Releases {
		if ch.Releases[i].Current {
			cur = &ch.Releases[i]
		}
	}
	if to == "" {
		for i := range ch.Releases {
			if r := &ch.Releases[i]; cur != nil && r.Seq < cur.Seq {
				target = r // the latest before the current
			}
		}
		if target == nil {
			return failed("%s at %s points at its first release %s: there is no earlier one to roll back to", product, ch.Destination, ch.Release)
		}
	} else {
		want := strings.TrimPrefix(to, "sha256:")
		for i := range ch.Releases {
			if strings.HasPrefix(strings.TrimPrefix(ch.Releases[i].Release, "sha256:"), want) {
				if target != nil {
					return failed("-to %s names more than one release of %s; give more of the digest", to, product)
				}
				target = &ch.Releases[i]
			}
		}
		if want == "" || target == nil {
			return failed("%s has no release %s at %s (foundry release lists them)", product, to, ch.Destination)
		}
	}
	if target.Current {
		return failed("%s at %s already points at %s", product, ch.Destination, target.Release)
	}
	d, err := lang.ParseDestination(ch.Destination, dir)
	if err != nil {
		return failed("%v", err)
	}
	if d.Scheme != lang.SchemeDir {
		return failed("%s delivers to %s: only a dir: channel can be rolled back", product, ch.Destination)
	}
	rd, err := digest.Parse(target.Release)
	if err != nil {
		return failed("release %s: %v", target.Release, err)
	}
	at := filepath.Join(d.Path, rd.Hex())

	// The target must be the release it was and still verify; until then nothing changes.
	refuse := func(why string) int {
		return failed("refusing to roll %s back to %s: %s; nothing was changed", product, target.Release, why)
	}
	b, err := os.ReadFile(filepath.Join(at, deliver.ManifestFile))
	if err != nil {
		return refuse(fmt.Sprintf("its release directory %s: %v", at, err))
	}
	if got := digest.FromBytes(b); got != rd {
		return refuse(fmt.Sprintf("%s hashes to %s, not to the release's digest", filepath.Join(at, deliver.ManifestFile), got))
	}
	keys, err := trustedKeys(dir, trust)
	if err != nil {
		return failed("%v", err)
	}
	if len(keys) == 0 {
		return refuse("the project has no signing key (.foundry/keys/signing.pub) and no -trust-key was given to verify it with")
	}
	rep, err := verifyReleaseDir(ctx, at, keys)
	if err != nil {
		return refuse(err.Error())
	}
	if !rep.OK {
		var why bytes.Buffer
		rep.WriteText(&why)
		return refuse("it does not verify with the trusted keys (foundry verify -key PEM " + at + "):\n" + why.String())
	}
	if err := deliver.PointCurrent(d.Path, product, rd.Hex()); err != nil {
		return failed("%v", err)
	}
	if err := db.MoveChannel(ctx, product, ch.Destination, target.Release, "rollback from "+ch.Release); err != nil {
		if errors.Is(err, state.ErrNoRelease) {
			return failed("%v", err)
		}
		return failed("%s now points at %s, but the channel row was not written: %v", filepath.Join(d.Path, deliver.CurrentLink), rd.Hex(), err)
	}
	data := filepath.Join(d.Path, deliver.CurrentLink, deliver.DataDir)
	if jsonOut {
		writeJSON(env.stdout, map[string]any{"product": product, "destination": ch.Destination, "from": ch.Release,
			"to": target.Release, "location": target.Location, "verified": true, "data": data})
		return exitOK
	}
	fmt.Fprintf(env.stdout, "Rolled %s at %s back from %s to %s (verified).\n", product, ch.Destination, ch.Release, target.Release)
	fmt.Fprintf(env.stdout, "%s -> %s; its data is %s. Restart the service from there.\n", filepath.Join(d.Path, deliver.CurrentLink), rd.Hex(), data)
	return exitOK
}
