package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	gitcache "github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/lang"
)

// fetchGit fetches commit s.Pin from the repository at u with go-git's smart HTTP
// protocol, through the granted client, into a scratch object store, and makes the tree of
// the commit. A server that lets a client ask for any commit it holds
// (allow-reachable-sha1-in-want, allow-tip-sha1-in-want) sends that commit alone, shallow
// when it can; another sends every branch and tag, among whose history the commit must be.
// Submodules are not fetched: each is an empty directory, as a clone that does not recurse
// leaves it.
func (f *Fetcher) fetchGit(ctx context.Context, c *client, s *lang.Source, u string) ([]cache.Output, error) {
	dir, err := os.MkdirTemp(f.Scratch, "git-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st := filesystem.NewStorage(osfs.New(dir), gitcache.NewObjectLRUDefault())
	want := plumbing.NewHash(s.Pin)
	if err := gitFetch(ctx, c, u, want, st); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	commit, err := object.GetCommit(st, want)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, &MismatchError{URL: u, Expected: "commit " + s.Pin, Actual: "no such commit on any branch or tag"}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: commit %s: %w", u, s.Pin, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("%s: the tree of commit %s: %w", u, s.Pin, err)
	}
	t := newTree(ctx, f.Store, s.Limits, false)
	if err := gitTree(t, st, root, ""); err != nil {
		return nil, fmt.Errorf("%s: commit %s: %w", u, s.Pin, err)
	}
	tree, err := t.store()
	if err != nil {
		return nil, fmt.Errorf("%s: commit %s: %w", u, s.Pin, err)
	}
	ts, _ := f.Store.Stat(tree)
	return []cache.Output{{Path: TreeOutput, Kind: cache.Tree, Digest: tree, Size: ts}}, nil
}

// gitFetch asks the repository at u for want and stores the pack it sends in st.
func gitFetch(ctx context.Context, c *client, u string, want plumbing.Hash, st storer.Storer) error {
	ep, err := transport.NewEndpoint(u)
	if err != nil {
		return err
	}
	sess, err := githttp.NewClient(c.http()).NewUploadPackSession(ep, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Capabilities.Delete(capability.ThinPack) // nothing to complete a thin pack with
	if ar.Capabilities.Supports(capability.NoProgress) {
		req.Capabilities.Set(capability.NoProgress)
	}
	caps := ar.Capabilities
	if caps.Supports(capability.AllowReachableSHA1InWant) || caps.Supports(capability.AllowTipSHA1InWant) || advertises(ar, want) {
		req.Wants = []plumbing.Hash{want}
		if caps.Supports(capability.Shallow) {
			req.Depth = packp.DepthCommits(1)
			req.Capabilities.Set(capability.Shallow)
		}
	} else {
		seen := map[plumbing.Hash]bool{}
		for name, h := range ar.References {
			if (strings.HasPrefix(name, "refs/heads/") || strings.HasPrefix(name, "refs/tags/")) && !seen[h] {
				seen[h] = true
				req.Wants = append(req.Wants, h)
			}
		}
		if len(req.Wants) == 0 {
			return errors.New("the repository has no branch or tag")
		}
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return fmt.Errorf("asking for commit %s: %w", want, err)
	}
	defer resp.Close()
	var r io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		r = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		r = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	return packfile.UpdateObjectStorage(st, r)
}

// advertises reports whether the repository advertised h as the tip of a reference.
func advertises(ar *packp.AdvRefs, h plumbing.Hash) bool {
	for _, r := range ar.References {
		if r == h {
			return true
		}
	}
	return false
}

// gitTree adds the git tree gt, at dir, to t.
func gitTree(t *tree, st storer.EncodedObjectStorer, gt *object.Tree, dir string) error {
	for _, e := range gt.Entries {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") || strings.EqualFold(e.Name, ".git") {
			return refuse("the tree has an entry named %q", e.Name)
		}
		p := path.Join(dir, e.Name)
		if len(p) > maxNameBytes {
			return refuse("an entry's name is longer than %d bytes", maxNameBytes)
		}
		if _, err := cleanName(p); err != nil {
			return err
		}
		switch e.Mode {
		case filemode.Dir:
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := t.dir(p); err != nil {
				return err
			}
			if err := gitTree(t, st, sub, p); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			b, err := object.GetBlob(st, e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			r, err := b.Reader()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			mode := int64(0o644)
			if e.Mode == filemode.Executable {
				mode = 0o755
			}
			err = t.file(p, mode, r)
			r.Close()
			if err != nil {
				return err
			}
		case filemode.Symlink:
			b, err := object.GetBlob(st, e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if b.Size > maxTargetBytes {
				return refuse("symlink %q has a target longer than %d bytes", p, maxTargetBytes)
			}
			r, err := b.Reader()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			target, err := io.ReadAll(io.LimitReader(r, maxTargetBytes+1))
			r.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := t.symlink(p, string(target)); err != nil {
				return err
			}
		case filemode.Submodule:
			if err := t.dir(p); err != nil {
				return err
			}
		default:
			return refuse("entry %q has mode %s, which is not a file, a directory, a link or a submodule", p, e.Mode)
		}
	}
	return nil
}
