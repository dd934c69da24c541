package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

func init() {
	register(&command{
		name:    "pull",
		summary: "Fetch a capability by digest, verify its attestations, extract it safely",
		usage:   "foundry pull REF -o DIR [-key PUB]... [-no-verify] [-type T]... [-builder ID]... [-policy FILE] [-C DIR] [-json]",
		help: `
Pull fetches a published capability and writes its files to a new directory DIR, in this
order, so that nothing is written unless everything checked out:

  1. a tag in REF is resolved to a manifest digest once; only the digest is used after that
  2. a quarantined digest (foundry quarantine, in the project at -C) is refused
  3. the manifest is fetched by digest, checked against it, and must be a Foundry capability
  4. the contract and layers are fetched and checked against their digests and sizes; the
     tar entries must be plain files, directories and symlinks that stay inside the tree
     (no absolute paths, no "..", no hard links, no devices, nothing written through a
     symlink), and together they must hash to the declared tree digest
  5. its attached attestations must verify with a -key, like 'foundry verify' (signature,
     in-toto statement, the required -type). By default that is Foundry's admission, a
     verification summary (https://slsa.dev/verification_summary/v1) that names this
     manifest, its contract and the tree just recomputed from the layers, with its chain:
     a sealed test result PASSED for that tree and the build's provenance. With -type
     https://slsa.dev/provenance/v1 instead, provenance naming the manifest or the tree
     from an allowed builder is enough (an artifact Foundry did not admit, such as an image)
  6. DIR is created (built beside it and renamed into place)

REF is a full reference:
  host[:port]/repo:TAG   or  host[:port]/repo@sha256:HEX     a registry (HTTPS; plain HTTP
                                                               only for 127.0.0.1/localhost)
  oci-layout:PATH:TAG    or  oci-layout:PATH@sha256:HEX      an OCI layout on disk
or just TAG / sha256:HEX in the project's embedded registry (oci-layout:.foundry/registry
under -C). Tags are channels: pull them to look, pin the digest it prints.

Skipping verification must be explicit (-no-verify); the digest, size and safety checks
still run.

Examples:
  foundry pull 127.0.0.1:5000/scores/int-sort:stable -o int-sort -key foundry.pub
  foundry pull registry.example.com/scores/int-sort@sha256:4f2a... -o int-sort -key foundry.pub -json
  foundry pull sha256:4f2a... -o int-sort -key foundry.pub -C ~/projects/scores
  foundry pull oci-layout:/mnt/usb/registry@sha256:4f2a... -o int-sort -no-verify

The same attestations verify with cosign (see 'foundry registry -help').

Exit codes: 0 pulled and verified (or -no-verify), 1 not pulled: not found, quarantined,
attestations that do not verify (the report is printed), a digest mismatch or an unsafe
layer, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var keys, types, builders stringList
			out := fs.String("o", "", "write the capability's files to the new directory `DIR` (required)")
			fs.Var(&keys, "key", "trusted public key `PEM` file (repeatable; default the project's own .foundry/keys/signing.pub, when -C DIR has one)")
			noVerify := fs.Bool("no-verify", false, "skip attestation checks (digest and safety checks still run)")
			fs.Var(&types, "type", "required predicate `TYPE` (repeatable; default https://slsa.dev/verification_summary/v1, Foundry's admission)")
			fs.Var(&builders, "builder", "allowed builder `ID` (repeatable; default Foundry's sandboxed executors)")
			policyPath := fs.String("policy", "", "JSON policy `FILE`, as for foundry verify")
			project := fs.String("C", ".", "project `DIR` whose quarantine is consulted (and whose registry a bare TAG names)")
			jsonOut := fs.Bool("json", false, "print the result as JSON")
			return func(env *cliEnv, args []string) int {
				usage := func(format string, a ...any) int { return usageError(env, "pull", format, a...) }
				args, err := interspersed(fs, args)
				if err != nil {
					return usage("%v", err)
				}
				if len(args) != 1 {
					return usage("want exactly one REF, got %d", len(args))
				}
				return pullCapability(env, pullOptions{Out: *out, Keys: keys, NoVerify: *noVerify, Types: types, Builders: builders,
					Policy: *policyPath, Project: *project, JSON: *jsonOut}, args[0])
			}
		},
	})
}

// openRef opens the store a reference names and returns the tag or digest in it. A bare
// TAG or sha256:HEX means the project's embedded registry.
func openRef(arg, project string) (registry.Store, string, error) {
	if strings.HasPrefix(arg, registry.LayoutScheme) || strings.Contains(arg, "/") {
		addr, ref, err := registry.SplitReference(arg)
		if err != nil {
			return nil, "", err
		}
		s, err := registry.Open(addr)
		return s, ref, err
	}
	s, err := registry.Open(registry.LayoutScheme + filepath.Join(project, workspace.StateDir, "registry"))
	return s, arg, err
}

func keyNames(r *provenance.Report) string {
	if r == nil {
		return "?"
	}
	seen := map[string]bool{}
	var names []string
	for _, a := range r.Artifacts {
		for _, at := range a.Attestations {
			if !at.OK {
				continue
			}
			for _, n := range at.SignedBy {
				if !seen[n.Name] {
					seen[n.Name] = true
					names = append(names, n.Name)
				}
			}
		}
	}
	return strings.Join(names, ", ")
}

// interspersed lets flags follow positional arguments ("foundry pull REF -o DIR"): the flag
// package stops at the first positional, so parse again after each one.
func interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		if err := fs.Parse(args[1:]); err != nil {
			return nil, err
		}
		args = fs.Args()
	}
	return pos, nil
}

// pullOptions are what `foundry pull` reads from its flags.
type pullOptions struct {
	Out      string   // the new directory the capability's files are written to (-o)
	Keys     []string // trusted public key files (-key)
	NoVerify bool     // skip the attestation checks (-no-verify)
	Types    []string // required predicate types (-type)
	Builders []string // allowed builder IDs (-builder)
	Policy   string   // a JSON policy file (-policy)
	Project  string   // the project whose quarantine is consulted (-C)
	JSON     bool     // print the result as JSON
}

// pullCapability is the core of `foundry pull`: the capability arg names, verified under
// opt, written to opt.Out.
func pullCapability(env *cliEnv, opt pullOptions, arg string) int {
	usage := func(format string, a ...any) int { return usageError(env, "pull", format, a...) }
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry pull: "+format+"\n", a...)
		return exitError
	}
	if opt.Out == "" {
		return usage("no -o DIR")
	}
	if opt.NoVerify && (len(opt.Keys) > 0 || len(opt.Types) > 0 || len(opt.Builders) > 0 || opt.Policy != "") {
		return usage("-no-verify together with -key, -type, -builder or -policy: choose one")
	}
	if !opt.NoVerify && len(opt.Keys) == 0 {
		own, ok := projectKey(env, "pull", opt.Project)
		if !ok {
			return usage("no -key: pull verifies attestations with a trusted public key (or say -no-verify); inside a project (-C DIR), its own .foundry/keys/signing.pub is the default")
		}
		opt.Keys = append(opt.Keys, own)
	}
	s, ref, err := openRef(arg, opt.Project)
	if err != nil {
		return failed("%v", err)
	}
	po := registry.PullOptions{NoVerify: opt.NoVerify}
	if !opt.NoVerify {
		if po.Keys, err = provenance.LoadVerifiers(opt.Keys...); err != nil {
			return failed("%v", err)
		}
		if opt.Policy != "" {
			p, err := provenance.LoadPolicy(opt.Policy)
			if err != nil {
				return failed("%v", err)
			}
			po.Policy = *p
		}
		po.Policy.Builders = appendNew(po.Policy.Builders, opt.Builders...)
		po.Policy.PredicateTypes = appendNew(po.Policy.PredicateTypes, opt.Types...)
		if len(po.Policy.PredicateTypes) == 0 {
			po.Policy.PredicateTypes = []string{provenance.PredicateVSA}
		}
	}
	// The project's quarantine is consulted when the project has state; pull
	// never creates a project.
	stateDir := filepath.Join(opt.Project, workspace.StateDir)
	if fileExists(filepath.Join(stateDir, "state.db")) {
		db, err := state.OpenState(filepath.Join(stateDir, "state.db"))
		if err != nil {
			return failed("%v", err)
		}
		defer db.Close()
		po.Quarantine = db
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := registry.Pull(ctx, s, ref, opt.Out, po)
	if err != nil {
		var ve *registry.VerificationError
		if errors.As(err, &ve) && ve.Report != nil {
			if opt.JSON {
				writeJSON(env.stdout, map[string]any{"ok": false, "error": err.Error(), "report": ve.Report})
			} else {
				fmt.Fprintf(env.stderr, "foundry pull: %s: attestations do not verify; nothing was written\n\n", ve.Digest)
				_ = ve.Report.WriteText(env.stderr)
				if len(opt.Types) == 0 && opt.Policy == "" {
					fmt.Fprintf(env.stderr, "\nThe default requires Foundry's admission (-type %s). For an artifact Foundry\nbuilt but did not admit, require its provenance instead: -type %s\n",
						provenance.PredicateVSA, provenance.PredicateSLSAProvenance)
				}
			}
			return exitError
		}
		if opt.JSON {
			writeJSON(env.stdout, map[string]any{"ok": false, "error": err.Error()})
		}
		return failed("%v", err)
	}
	if opt.JSON {
		writeJSON(env.stdout, res)
		return exitOK
	}
	fmt.Fprintf(env.stdout, "pulled %s %s (%s) into %s\n  manifest %s\n  tree     %s\n  contract %s\n",
		res.Name, res.Version, res.Target, res.Dest, res.Digest, res.Tree, res.Contract)
	if res.Verified {
		fmt.Fprintf(env.stdout, "  verified: attestations signed by %s name %s\n", keyNames(res.Report), res.VerifiedSubject)
	} else {
		fmt.Fprintln(env.stdout, "  NOT VERIFIED (-no-verify)")
	}
	if !strings.Contains(arg, "@") && !strings.HasPrefix(arg, "sha256:") {
		fmt.Fprintf(env.stdout, "Pin it: %s@%s\n", strings.TrimSuffix(arg, ":"+ref), res.Digest)
	}
	return exitOK
}
