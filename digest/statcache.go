package digest

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StatCache remembers the digests of regular files by what lstat/fstat says about them
// (device, inode, size, modification and change times), so that an unchanged file is not
// read again: planning a project that mounts a 250 MB toolchain with host_dir then costs a
// walk of the tree, not a read of it. This is how git's index and Bazel's digest cache
// avoid rehashing.
//
// The change time cannot be set by an unprivileged user, and every write moves it, so a
// file with the same key has the same content, with one exception: a file changed again
// within the file system's timestamp granularity after it was hashed. Files changed less
// than racyWindow before the cache was opened are therefore never remembered (git's "racy
// clean" rule).
//
// A StatCache is safe for concurrent use. Save writes it back atomically; entries not used
// for maxIdle are dropped then.
type StatCache struct {
	path   string
	opened time.Time

	mu      sync.Mutex
	entries map[string]statEntry
	dirty   bool
	// hits and misses count Lookups answered and not answered since the cache was
	// opened: a miss is a file that is read and hashed.
	hits, misses int
}

type statEntry struct {
	key    statKey
	digest Digest
	used   int64 // Unix seconds
}

type statKey struct {
	dev, ino, size, mtime, ctime int64
}

const (
	racyWindow = 2 * time.Second
	maxIdle    = 30 * 24 * time.Hour
	// usedGranularity is how stale an entry's last use may be before a hit records it.
	usedGranularity = 24 * time.Hour
	// statCacheHeader starts the file; another first line means another format, and the
	// file is ignored (and replaced by Save).
	statCacheHeader = "foundry-stat-cache 1"
)

// OpenStatCache reads the cache at path. A missing or unreadable file gives an empty
// cache: the cache only ever saves work, so a damaged one costs a rehash, never an error.
func OpenStatCache(path string) *StatCache {
	c := &StatCache{path: path, opened: time.Now(), entries: map[string]statEntry{}}
	if b, err := os.ReadFile(path); err == nil {
		c.entries = parseStatCache(b)
	}
	return c
}

// parseStatCache reads lines of "digest dev ino size mtime ctime used path" after the
// header; a malformed line is skipped.
func parseStatCache(b []byte) map[string]statEntry {
	out := map[string]statEntry{}
	header, rest, _ := bytes.Cut(b, []byte{'\n'})
	if string(header) != statCacheHeader {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(rest))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 8)
		if len(f) != 8 || f[7] == "" || !filepath.IsAbs(f[7]) {
			continue
		}
		d := Digest(f[0])
		if d.Validate() != nil {
			continue
		}
		var n [6]int64
		ok := true
		for i := range n {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				ok = false
				break
			}
			n[i] = v
		}
		if !ok {
			continue
		}
		out[f[7]] = statEntry{key: statKey{dev: n[0], ino: n[1], size: n[2], mtime: n[3], ctime: n[4]}, digest: d, used: n[5]}
	}
	return out
}

// keyOf returns the cache key of a regular file's FileInfo, or false when it cannot be
// cached: not a regular file, no stat data, or changed within the racy window.
func (c *StatCache) keyOf(fi fs.FileInfo) (statKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return statKey{}, false
	}
	k := statKey{dev: int64(st.Dev), ino: int64(st.Ino), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	limit := c.opened.Add(-racyWindow).UnixNano()
	if k.mtime >= limit || k.ctime >= limit {
		return statKey{}, false
	}
	return k, true
}

// Lookup returns the remembered digest of the file at path (absolute), if fi matches.
func (c *StatCache) Lookup(path string, fi fs.FileInfo) (Digest, bool) {
	if c == nil {
		return "", false
	}
	k, ok := c.keyOf(fi)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, found := c.entries[path]
	if !ok || !found || e.key != k {
		c.misses++
		return "", false
	}
	c.hits++
	// Use is recorded by the day: a cache whose entries all hit is not rewritten on every
	// load.
	if now := c.opened.Unix(); now-e.used > int64(usedGranularity/time.Second) {
		e.used = now
		c.entries[path] = e
		c.dirty = true
	}
	return e.digest, true
}

// Counts returns how many Lookups found a remembered digest (hits) and how many did not
// (misses: files read and hashed) since the cache was opened. A nil cache has neither.
func (c *StatCache) Counts() (hits, misses int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Store remembers d as the digest of the file at path (absolute), described by fi.
func (c *StatCache) Store(path string, fi fs.FileInfo, d Digest) {
	if c == nil || strings.ContainsAny(path, "\n\r") || !filepath.IsAbs(path) {
		return
	}
	k, ok := c.keyOf(fi)
	if !ok {
		return
	}
	c.mu.Lock()
	c.entries[path] = statEntry{key: k, digest: d, used: c.opened.Unix()}
	c.dirty = true
	c.mu.Unlock()
}

// Save writes the cache back if it changed (temp file, fsync, rename), dropping entries
// idle for longer than maxIdle.
func (c *StatCache) Save() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	paths := make([]string, 0, len(c.entries))
	oldest := c.opened.Add(-maxIdle).Unix()
	for p, e := range c.entries {
		if e.used >= oldest {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var b bytes.Buffer
	b.WriteString(statCacheHeader + "\n")
	for _, p := range paths {
		e := c.entries[p]
		fmt.Fprintf(&b, "%s %d %d %d %d %d %d %s\n", e.digest, e.key.dev, e.key.ino, e.key.size, e.key.mtime, e.key.ctime, e.used, p)
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("digest: stat cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".stat-cache-*")
	if err != nil {
		return fmt.Errorf("digest: stat cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		return fmt.Errorf("digest: stat cache: %w", err)
	}
	c.dirty = false
	return nil
}

// sameStat reports whether two FileInfos of one open file describe the same content
// (by the cache's key).
func sameStat(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Size == sb.Size &&
		sa.Mtim == sb.Mtim && sa.Ctim == sb.Ctim
}
