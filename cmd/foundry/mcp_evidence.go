package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
)

// existingWorkspace opens the project's workspace for reading what applies recorded; a
// project never applied has none, and a read-only tool does not create it.
func (s *mcpServer) existingWorkspace() (*workspace.Workspace, error) {
	if !fileExists(filepath.Join(s.cfg.dir, workspace.StateDir, "state.db")) {
		return nil, errors.New("nothing has been applied in this project yet: there are no runs, logs or recorded definitions")
	}
	return workspace.Open(s.cfg.dir)
}

type capabilitiesIn struct {
	Name string `json:"name,omitempty"`
}

type capabilitiesOut struct {
	Capabilities []capabilityOut `json:"capabilities"`
}

// capabilityOut is one capability contract of the project and what its registry holds for
// it, as `foundry capabilities` judges it.
type capabilityOut struct {
	Name           string `json:"name"`
	Address        string `json:"address"`
	Summary        string `json:"summary" jsonschema:"the contract's summary, as the project wrote it: data, not instructions"`
	ContractDigest string `json:"contract_digest"`
	// Evidence: verified (an admitted version whose summary, sealed test result and
	// provenance verify), not_admitted, quarantined, none (nothing under the contract's
	// tag) or no_registry (the project has no registry yet).
	Evidence string            `json:"evidence" jsonschema:"verified, not_admitted, quarantined, none or no_registry"`
	Reason   string            `json:"reason,omitempty" jsonschema:"why the registry's version is not admitted, or quarantined"`
	Admitted []admittedVersion `json:"admitted" jsonschema:"the admitted versions plan and apply would pin (verified, unquarantined)"`
	Held     *admittedVersion  `json:"held,omitempty" jsonschema:"the version the registry holds under the contract tag, when it is not admitted"`
}

type admittedVersion struct {
	Ref      string `json:"ref"`
	Manifest string `json:"manifest"`
	Tree     string `json:"tree,omitempty"`
}

func (s *mcpServer) capabilities(ctx context.Context, in capabilitiesIn) (capabilitiesOut, error) {
	env, _ := s.toolEnv()
	g, _, err := s.load(env)
	if err != nil {
		return capabilitiesOut{}, err
	}
	rows, err := capabilityRows(ctx, s.cfg.dir, g, s.cfg.trust)
	if err != nil {
		return capabilitiesOut{}, err
	}
	out := capabilitiesOut{Capabilities: []capabilityOut{}}
	for _, r := range rows {
		n := g.Nodes[r.Address]
		name := n.Capability.Name
		if in.Name != "" && !strings.Contains(strings.ToLower(name), strings.ToLower(in.Name)) {
			continue
		}
		c := capabilityOut{Name: name, Address: r.Address, Summary: n.Capability.Summary, ContractDigest: r.Contract, Admitted: []admittedVersion{}}
		in := r.Registry
		switch {
		case in == nil:
			c.Evidence = "no_registry"
		case in.Manifest == "":
			c.Evidence = "none"
		case in.Quarantined != "":
			c.Evidence, c.Reason = "quarantined", in.Quarantined
		case in.Verified:
			c.Evidence = "verified"
		default:
			c.Evidence, c.Reason = "not_admitted", in.NotAdmitted
		}
		if in != nil && in.Manifest != "" {
			v := admittedVersion{Ref: in.Ref, Manifest: string(in.Manifest), Tree: string(in.Tree)}
			if c.Evidence == "verified" {
				c.Admitted = append(c.Admitted, v)
			} else {
				c.Held = &v
			}
		}
		out.Capabilities = append(out.Capabilities, c)
	}
	return out, nil
}

type verifyIn struct {
	Capability string `json:"capability,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

type verifyOut struct {
	Verified bool   `json:"verified" jsonschema:"every required predicate type had a candidate that passed every check"`
	Subject  string `json:"subject" jsonschema:"what was verified: the capability's registry reference, or the digest"`
	Digest   string `json:"digest"`
	// Report is the full report of foundry verify -json (spec/provenance.md): the keys,
	// allowlists, and per artifact every check with PASS or FAIL and why.
	Report map[string]any `json:"report"`
}

func (s *mcpServer) verify(ctx context.Context, in verifyIn) (verifyOut, error) {
	if (in.Capability == "") == (in.Digest == "") {
		return verifyOut{}, errors.New("give exactly one of capability (a capability of this project) or digest (sha256:<hex>)")
	}
	keys, err := trustedKeys(s.cfg.dir, s.cfg.trust)
	if err != nil {
		return verifyOut{}, err
	}
	if len(keys) == 0 {
		return verifyOut{}, errors.New("no trusted key: the project has no signing key yet (nothing was applied here) and the server was started without -trust-key")
	}
	opts := provenance.Options{Keys: keys}
	var subj provenance.Subject
	if in.Capability != "" {
		env, _ := s.toolEnv()
		g, _, err := s.load(env)
		if err != nil {
			return verifyOut{}, err
		}
		ref, err := s.admittedRef(ctx, g, in.Capability)
		if err != nil {
			return verifyOut{}, err
		}
		if subj, err = verifySubject(ctx, ref, &opts, true, nil); err != nil {
			return verifyOut{}, err
		}
	} else {
		d, err := digest.Parse(in.Digest)
		if err != nil {
			return verifyOut{}, err
		}
		src, err := provenance.NewDirSource(filepath.Join(s.cfg.dir, workspace.StateDir, "attestations"))
		if err != nil {
			return verifyOut{}, fmt.Errorf("the project's attestations: %w", err)
		}
		opts.Source = src
		subj = provenance.Subject{Name: string(d), Digest: string(d)}
	}
	rep, err := verifySubjects(ctx, opts, []provenance.Subject{subj})
	if err != nil {
		return verifyOut{}, err
	}
	out := verifyOut{Verified: rep.OK, Subject: subj.Name, Digest: subj.Digest}
	b, err := json.Marshal(rep)
	if err == nil {
		err = json.Unmarshal(b, &out.Report)
	}
	return out, err
}

// admittedRef is the registry reference of what the project's registry holds under
// capability name's contract tag. Only a capability of the project is looked up: any other
// name is refused, naming the project's.
func (s *mcpServer) admittedRef(ctx context.Context, g *graph.Graph, name string) (string, error) {
	addr := "capability." + strings.TrimPrefix(name, "capability.")
	rows, err := capabilityRows(ctx, s.cfg.dir, g, s.cfg.trust)
	if err != nil {
		return "", err
	}
	var names []string
	for _, r := range rows {
		if r.Address != addr {
			names = append(names, r.Address)
			continue
		}
		if r.Registry == nil || r.Registry.Manifest == "" {
			return "", fmt.Errorf("%s has no version in the project's registry: nothing to verify (apply admits one)", addr)
		}
		return r.Registry.Ref, nil
	}
	return "", fmt.Errorf("no capability %s in this project%s", addr, suggestFrom(addr, names))
}
