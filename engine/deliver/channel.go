package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// The channel of a dir: destination (spec/grants.md, "Release channels").
const (
	// CurrentLink is DEST/current, a symbolic link to the <hex> of the release the
	// product's channel points at; it is replaced by a rename, so it is always one release.
	CurrentLink = "current"
	// DataDir is DEST/<hex>/data, the release's data: the directory its service keeps its
	// data in (started from DEST/current, it is current/data). It is not part of the signed
	// release. A release new to the destination starts with a copy of the data of the
	// release the channel pointed at, made when the channel moves to it; a rollback
	// re-points the channel, and so the data the service sees, to the earlier release's
	// data/, as it was when the channel left it.
	DataDir = "data"
)

// advance records rel, delivered to location, and moves its channel to it when the release
// is new to the destination: in a dir: destination the data of the release the channel
// pointed at is copied into the new one's data/, and DEST/current is re-pointed, before the
// rows are written, so a crash between them is completed by the next delivery.
func (d *Deliverer) advance(ctx context.Context, rel *release, location string) error {
	st := d.Workspace.State
	dest := rel.Dest.String()
	if _, err := st.ReleaseOf(ctx, rel.Product, dest, string(rel.digest)); err == nil {
		return nil // delivered before: the channel stays where it is (a rollback too)
	} else if !errors.Is(err, state.ErrNoRelease) {
		return err
	}
	row := state.Release{Product: rel.Product, Destination: dest, Release: string(rel.digest), Location: location}
	if rel.Dest.Scheme == lang.SchemeDir {
		// The destination directory as the delivery wrote it: beneath its grant.
		b, err := OpenBeneath(rel.Root, rel.Dest.Path)
		if err != nil {
			return err
		}
		defer b.Close()
		at := filepath.Join(b.Path, rel.digest.Hex())
		if env, err := os.ReadFile(filepath.Join(at, ReceiptFile)); err == nil {
			row.Receipt = provenance.EnvelopeDigest(env)
		}
		if prev, ok, err := d.channelOf(ctx, rel.Product, dest); err != nil {
			return err
		} else if ok {
			if err := copyData(filepath.Join(b.Path, strings.TrimPrefix(prev, "sha256:")), at); err != nil {
				return fmt.Errorf("%s: the data of release %s: %w", rel.Product, prev, err)
			}
		}
		// The first release of a channel starts with an empty data/, so that current/data
		// is there for its service to keep its data in.
		if err := os.Mkdir(filepath.Join(at, DataDir), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: the data directory of release %s: %w", rel.Product, rel.digest.Short(), err)
		}
		if err := PointCurrent(b.Path, rel.Product, rel.digest.Hex()); err != nil {
			return err
		}
	}
	if _, _, err := st.RecordRelease(ctx, row); err != nil {
		return err
	}
	return st.MoveChannel(ctx, rel.Product, dest, string(rel.digest), "delivered")
}

func (d *Deliverer) channelOf(ctx context.Context, product, dest string) (string, bool, error) {
	chs, err := d.Workspace.State.Channels(ctx)
	if err != nil {
		return "", false, err
	}
	for _, c := range chs {
		if c.Product == product && c.Destination == dest {
			return c.Release, true, nil
		}
	}
	return "", false, nil
}

// PointCurrent points DEST/current at the release <hex> of product, by renaming a new link
// over it. A link naming a release of another product is refused: a dir: destination holds
// one product's channel.
func PointCurrent(destDir, product, hex string) error {
	link := filepath.Join(destDir, CurrentLink)
	if old, err := os.Readlink(link); err == nil {
		var m Manifest
		if b, err := os.ReadFile(filepath.Join(destDir, old, ManifestFile)); err == nil && json.Unmarshal(b, &m) == nil && m.Product != product {
			return fmt.Errorf("%s names a release of %s, not of %s: a dir: destination holds one product's channel", link, m.Product, product)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", link, err)
	}
	tmp := filepath.Join(destDir, ".tmp-"+CurrentLink+"-"+hex[:16])
	os.Remove(tmp)
	if err := os.Symlink(hex, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(destDir)
}

// copyData copies from/data into to/data, when the first exists and the second does not,
// through a temporary directory renamed into place.
func copyData(from, to string) error {
	src := filepath.Join(from, DataDir)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil
	}
	dst := filepath.Join(to, DataDir)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	tmp := filepath.Join(to, ".tmp-"+DataDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(tmp, rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			return os.MkdirAll(out, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, out)
		case fi.Mode().IsRegular():
			return copyFile(p, out, fi.Mode().Perm())
		}
		return nil // sockets, fifos: not data to carry over
	})
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
