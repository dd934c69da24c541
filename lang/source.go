package lang

import (
	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/foundry-build/foundry/digest"
)

// Source is a pinned input that lives elsewhere (spec/language.md §6a): an HTTP(S) file or
// archive by its sha256, a git repository at a commit, or an OCI artifact or image by its
// digest. Foundry fetches it itself (never a step), checks it against its pin before
// anything sees it, and keeps it in the content store; steps see it as a directory tree.
// Where it is fetched from (URLs, mirrors) does not change what it is: the node's
// definition holds the pin and how the bytes become a tree, not the URLs.
type Source struct {
	Name  string
	Scope string // "" at the project's top level, module.M in a module
	Type  string // SourceHTTP, SourceGit or SourceOCI
	// URLs are where it is fetched from, in the order they are tried: the url, git or oci
	// attribute, then the mirrors. An oci URL is a registry reference HOST[:PORT]/REPO@DIGEST.
	URLs []string
	// Pin is what the content must be: for http the SHA-256 of the bytes ("sha256:<hex>"),
	// for git the commit id (40 lowercase hex digits), for oci the manifest's digest.
	Pin string
	// Archive is how an http source's bytes become a tree: ArchiveTar, ArchiveTarGz,
	// ArchiveTarXz, ArchiveZip (unpacked), or ArchiveFile (the tree holds the one file, named
	// File). Strip removes that many leading path elements from each entry of an archive.
	Archive   string
	Strip     int
	File      string
	Limits    SourceLimits
	DeclRange hcl.Range
}

// Kinds of source.
const (
	SourceHTTP = "http"
	SourceGit  = "git"
	SourceOCI  = "oci"
)

// How an http source's bytes become a tree.
const (
	ArchiveFile  = "file"
	ArchiveTar   = "tar"
	ArchiveTarGz = "tar.gz"
	ArchiveTarXz = "tar.xz"
	ArchiveZip   = "zip"
)

// SourceLimits bound one fetch. They do not change what a source is, so they are not in
// its definition: a fetch that stays within them produces the pinned content, and one
// that does not fails.
type SourceLimits struct {
	Download int64         // bytes received from the network, per URL tried
	Unpacked int64         // bytes of the files of the tree
	Entries  int           // files, directories and links of the tree
	Time     time.Duration // wall time of the whole fetch, every URL tried
}

// DefaultSourceLimits are a source's limits where its limits block does not say.
var DefaultSourceLimits = SourceLimits{Download: 4 << 30, Unpacked: 16 << 30, Entries: 1 << 20, Time: 30 * time.Minute}

// Address is the source's node address: source.NAME, or under a module module.M.source.NAME.
func (s *Source) Address() string {
	if s.Scope == "" {
		return "source." + s.Name
	}
	return s.Scope + ".source." + s.Name
}

var sourceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "url"}, {Name: "git"}, {Name: "oci"}, {Name: "mirrors"},
		{Name: "sha256"}, {Name: "commit"}, {Name: "archive"}, {Name: "strip"}, {Name: "file"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "limits"}},
}

var sourceLimitsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "download"}, {Name: "unpacked"}, {Name: "entries"}, {Name: "time"},
}}

var (
	hex64     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
	gitCommit = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}$`) })
)

// decodeSource decodes a source block.
func (l *loader) decodeSource(b *hcl.Block) {
	s := &Source{Name: b.Labels[0], Scope: l.prefix, DeclRange: b.DefRange, Limits: DefaultSourceLimits}
	content, diags := l.content(b.Body, sourceSchema)
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	attr := func(name string) (string, hcl.Range, bool) {
		a := content.Attributes[name]
		if a == nil {
			return "", hcl.Range{}, false
		}
		var v string
		l.optString(content, name, ctx, &v)
		return v, a.Expr.Range(), true
	}
	var kinds []string
	var primary string
	var primaryRange hcl.Range
	for _, k := range []string{"url", "git", "oci"} {
		if v, rng, ok := attr(k); ok {
			kinds = append(kinds, k)
			primary, primaryRange = v, rng
		}
	}
	if len(kinds) != 1 {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Invalid source",
			"source %q must have exactly one of url (an HTTP(S) file or archive, with sha256), git (a repository, with commit) or oci (a registry reference pinned by digest); it has %s.",
			s.Name, describeSet(kinds)))
		return
	}
	s.Type = map[string]string{"url": SourceHTTP, "git": SourceGit, "oci": SourceOCI}[kinds[0]]
	urls := []string{primary}
	ranges := []hcl.Range{primaryRange}
	if a := content.Attributes["mirrors"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			for _, m := range l.stringList(v, a.Expr.Range(), "mirrors") {
				urls = append(urls, m)
				ranges = append(ranges, a.Expr.Range())
			}
		}
	}
	// Attributes that belong to another kind of source are errors, never ignored.
	own := map[string][]string{SourceHTTP: {"sha256", "archive", "strip", "file"}, SourceGit: {"commit"}, SourceOCI: {}}[s.Type]
	for _, name := range []string{"sha256", "commit", "archive", "strip", "file"} {
		if a := content.Attributes[name]; a != nil && !slices.Contains(own, name) {
			l.diags = append(l.diags, errorf(a.NameRange.Ptr(), "Unexpected attribute", "%s does not belong to a source with %s; a source with %s has %s.",
				name, kinds[0], kinds[0], describeSet(append([]string{"mirrors"}, own...))))
		}
	}
	switch s.Type {
	case SourceHTTP:
		l.decodeHTTPSource(s, content, urls, ranges, attr)
	case SourceGit:
		for i, u := range urls {
			l.checkSourceURL(u, ranges[i], "git")
		}
		c, rng, ok := attr("commit")
		switch {
		case !ok:
			l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Unpinned source", "source %q needs commit = \"<40 hex digits>\": a git source is pinned by the full id of a commit, never by a branch or tag.", s.Name))
		case !gitCommit().MatchString(c):
			l.diags = append(l.diags, errorAt(rng, "Unpinned source", "commit = %q is not the full id of a commit: write its 40 lowercase hex digits (a branch, tag or short id would be resolved at fetch time).", c))
		}
		s.Pin = c
	case SourceOCI:
		for i, u := range urls {
			d, err := parseOCISource(u)
			switch {
			case err != nil:
				l.diags = append(l.diags, errorAt(ranges[i], "Invalid source", "%v.", err))
			case s.Pin == "":
				s.Pin = d
			case d != s.Pin:
				l.diags = append(l.diags, errorAt(ranges[i], "Invalid source", "mirror %q names another digest than %s: a mirror holds the same content.", u, s.Pin))
			}
		}
	}
	s.URLs = urls
	for _, lb := range content.Blocks {
		s.Limits = l.decodeSourceLimits(lb, ctx)
	}
	if len(content.Blocks) > 1 {
		l.diags = append(l.diags, errorf(content.Blocks[1].DefRange.Ptr(), "Duplicate limits block", "A source has at most one limits block."))
	}
	l.cfg.Sources[strings.TrimPrefix(s.Address(), "source.")] = s
}

// decodeHTTPSource decodes what a source with url has: its pin and how its bytes become a
// tree.
func (l *loader) decodeHTTPSource(s *Source, content *hcl.BodyContent, urls []string, ranges []hcl.Range, attr func(string) (string, hcl.Range, bool)) {
	for i, u := range urls {
		l.checkSourceURL(u, ranges[i], "url")
	}
	sum, rng, ok := attr("sha256")
	sum = strings.TrimPrefix(sum, "sha256:")
	switch {
	case !ok:
		l.diags = append(l.diags, errorf(s.DeclRange.Ptr(), "Unpinned source", "source %q needs sha256 = \"<64 hex digits>\": the SHA-256 of the bytes its url serves, so that they are checked before anything sees them.", s.Name))
	case !hex64().MatchString(sum):
		l.diags = append(l.diags, errorAt(rng, "Unpinned source", "sha256 = %q is not a SHA-256: write its 64 lowercase hex digits.", sum))
	default:
		s.Pin = "sha256:" + sum
	}
	p := ""
	if u, err := url.Parse(urls[0]); err == nil {
		p = u.Path
	}
	if a, rng, ok := attr("archive"); ok {
		switch a {
		case ArchiveFile, ArchiveTar, ArchiveTarGz, ArchiveTarXz, ArchiveZip:
			s.Archive = a
		default:
			l.diags = append(l.diags, errorAt(rng, "Invalid source", "archive = %q: want %q, %q, %q, %q or %q (a file kept as it is).", a, ArchiveTar, ArchiveTarGz, ArchiveTarXz, ArchiveZip, ArchiveFile))
		}
	} else {
		s.Archive = ArchiveOf(p)
	}
	if a := content.Attributes["strip"]; a != nil {
		if v, d := l.eval(a.Expr, l.baseContext(), nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "strip"); ok {
				if n < 0 || n != math.Trunc(n) || n > 64 {
					l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid source", "strip = %v must be a whole number of leading path elements, from 0 to 64.", n))
				}
				s.Strip = int(n)
			}
		}
		if s.Archive == ArchiveFile {
			l.diags = append(l.diags, errorf(a.NameRange.Ptr(), "Unexpected attribute", "strip applies to an archive; this source is a file (archive = %q).", ArchiveFile))
		}
	}
	if f, rng, ok := attr("file"); ok {
		if s.Archive != ArchiveFile {
			l.diags = append(l.diags, errorf(content.Attributes["file"].NameRange.Ptr(), "Unexpected attribute", "file names the file of a source that is not an archive (archive = %q); this one is unpacked.", ArchiveFile))
		}
		if !validFileName(f) {
			l.diags = append(l.diags, errorAt(rng, "Invalid source", "file = %q must be one file name, without a slash.", f))
		}
		s.File = f
	} else if s.Archive == ArchiveFile {
		s.File = path.Base(p)
		if !validFileName(s.File) {
			l.diags = append(l.diags, errorf(s.DeclRange.Ptr(), "Invalid source", "source %q: the url names no file (%q); say what the file is called with file = \"NAME\".", s.Name, p))
		}
	}
}

// ArchiveOf is how a source whose URL path is p is unpacked when its archive attribute does
// not say: by the path's extension, and kept as a file when it has none of an archive.
func ArchiveOf(p string) string {
	p = strings.ToLower(p)
	switch {
	case strings.HasSuffix(p, ".tar.gz"), strings.HasSuffix(p, ".tgz"):
		return ArchiveTarGz
	case strings.HasSuffix(p, ".tar.xz"), strings.HasSuffix(p, ".txz"):
		return ArchiveTarXz
	case strings.HasSuffix(p, ".tar"):
		return ArchiveTar
	case strings.HasSuffix(p, ".zip"):
		return ArchiveZip
	}
	return ArchiveFile
}

func validFileName(f string) bool {
	return f != "" && f != "." && f != ".." && f != "/" && !strings.ContainsAny(f, "/\x00")
}

// checkSourceURL refuses a url or git URL that is not http(s) with a host Foundry can be
// granted, or that carries credentials (a project's files are no place for a secret).
func (l *loader) checkSourceURL(s string, rng hcl.Range, what string) {
	u, err := url.Parse(s)
	if err != nil {
		l.diags = append(l.diags, errorAt(rng, "Invalid source", "%s %q is not a URL: %v.", what, s, err))
		return
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		l.diags = append(l.diags, errorAt(rng, "Invalid source", "%s %q: Foundry fetches over https (or http) only.", what, s))
		return
	}
	if u.User != nil {
		l.diags = append(l.diags, errorAt(rng, "Invalid source", "%s %q carries credentials; a project's files are read by whoever reads the project.", what, s))
		return
	}
	if _, err := URLHostPort(u); err != nil {
		l.diags = append(l.diags, errorAt(rng, "Invalid source", "%s %q: %v.", what, s, err))
	}
}

// parseOCISource checks an oci source reference, HOST[:PORT]/REPO@sha256:<hex>, and returns
// its digest.
func parseOCISource(s string) (string, error) {
	repo, d, ok := strings.Cut(s, "@")
	if !ok || digest.Digest(d).Validate() != nil {
		return "", fmt.Errorf("oci = %q is not pinned: write HOST[:PORT]/REPO@sha256:<64 hex digits>", s)
	}
	if !registryRepo().MatchString(repo) {
		return "", fmt.Errorf("oci = %q: %q is not a registry repository (lowercase, with a host that has a dot or a port, or is localhost; no tag)", s, repo)
	}
	return d, nil
}

// OCISourceRepo is the repository of an oci source reference (what parseOCISource accepted).
func OCISourceRepo(ref string) string {
	repo, _, _ := strings.Cut(ref, "@")
	return repo
}

// SourceEndpoint is the host and port a source URL is fetched from: an http(s) or git URL's
// (URLHostPort), or an oci reference's registry (port 443 unless it names one; the registry
// client speaks plain HTTP only to loopback, on the port it names).
func SourceEndpoint(typ, s string) (HostPort, error) {
	if typ == SourceOCI {
		host, _, _ := strings.Cut(OCISourceRepo(s), "/")
		if strings.Contains(host, ":") && !strings.HasSuffix(host, "]") {
			return ParseHostPort(host)
		}
		return hostPort(host, strings.Trim(host, "[]"), "", 443)
	}
	u, err := url.Parse(s)
	if err != nil {
		return HostPort{}, err
	}
	return URLHostPort(u)
}

func (l *loader) decodeSourceLimits(b *hcl.Block, ctx *hcl.EvalContext) SourceLimits {
	lim := DefaultSourceLimits
	content, diags := l.content(b.Body, sourceLimitsSchema)
	l.diags = append(l.diags, diags...)
	for name, dst := range map[string]*int64{"download": &lim.Download, "unpacked": &lim.Unpacked} {
		a := content.Attributes[name]
		if a == nil {
			continue
		}
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if s, ok := l.str(v, a.Expr.Range(), name); ok {
				n, err := ParseSize(s)
				if err != nil {
					l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid size", "%s = %q: %v", name, s, err))
				} else {
					*dst = n
				}
			}
		}
	}
	if a := content.Attributes["entries"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "entries"); ok {
				if n < 1 || n != math.Trunc(n) || n > 1<<30 {
					l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid entries", "entries = %v must be a positive whole number.", n))
				} else {
					lim.Entries = int(n)
				}
			}
		}
	}
	if a := content.Attributes["time"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if t, ok := l.duration(v, a.Expr.Range(), "time", "10m", ""); ok {
				lim.Time = t
			}
		}
	}
	return lim
}

// sourceValue is the artifact source.NAME stands for.
func (l *loader) sourceValue(name string) cty.Value {
	return artifactVal(&Artifact{Kind: ArtifactSource, Node: l.addr("source", name), IsDir: true})
}

func describeSet(xs []string) string {
	switch len(xs) {
	case 0:
		return "none"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
