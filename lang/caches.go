package lang

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Cache is one cache volume a step mounts (spec/language.md §9b): a writable directory that
// persists between steps of the project, named by Name, for a tool's cache (GOCACHE, ~/.npm).
// It is not an input: what it holds is in no cache key, and provenance says it was mounted.
type Cache struct {
	Name    string // [a-z0-9][a-z0-9._-]{0,63}
	Sharing string // CacheShared (the default), CacheLocked or CachePrivate
	// MaxSize bounds the volume while a step runs, in bytes (a write past it is ENOSPC in
	// the step); 0 when not given: engine/volume's default (10 GiB).
	MaxSize int64
}

// The bounds of a cache's max_size: below CacheMinSize ext4's own metadata and journal
// take too much of it to be useful; CacheMaxSize is 16 TiB.
const (
	CacheMinSize = 16 << 20
	CacheMaxSize = 16 << 40
)

// Sharing modes of a cache (engine/volume implements them).
const (
	CacheShared  = "shared"
	CacheLocked  = "locked"
	CachePrivate = "private"
)

var cacheNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) })

// decodeCaches decodes a step's caches attribute: a map of sandbox path to a cache name, or
// to an object { name = "...", sharing = "locked", max_size = "2GiB" }.
func (l *loader) decodeCaches(st *Step, a *hcl.Attribute, ctx *hcl.EvalContext, scope *stepScope) {
	if a == nil {
		return
	}
	rng := a.Expr.Range()
	v, diags := l.eval(a.Expr, ctx, scope)
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() {
		return
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		l.typeErr(rng, "caches", `a map of sandbox path to cache name, such as { "/cache/go-build" = "go-build" }`, v)
		return
	}
	caches := map[string]*Cache{}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		target := k.AsString()
		c := &Cache{Sharing: CacheShared}
		switch {
		case ev.Type() == cty.String:
			c.Name, _ = l.str(ev, rng, "caches[\""+target+"\"]")
		case ev.Type().IsObjectType():
			for attr := range ev.Type().AttributeTypes() {
				if attr != "name" && attr != "sharing" && attr != "max_size" {
					l.diags = append(l.diags, errorAt(rng, "Invalid cache", "caches[%q] has %q; a cache is a name, or { name = \"...\", sharing = \"shared\" | \"locked\" | \"private\", max_size = \"2GiB\" }.", target, attr))
				}
			}
			if ev.Type().HasAttribute("name") {
				c.Name, _ = l.str(ev.GetAttr("name"), rng, "caches[\""+target+"\"].name")
			}
			if ev.Type().HasAttribute("sharing") {
				c.Sharing, _ = l.str(ev.GetAttr("sharing"), rng, "caches[\""+target+"\"].sharing")
			}
			if ev.Type().HasAttribute("max_size") {
				what := "caches[\"" + target + "\"].max_size"
				if str, ok := l.str(ev.GetAttr("max_size"), rng, what); ok {
					n, err := ParseSize(str)
					switch {
					case err != nil:
						l.diags = append(l.diags, errorAt(rng, "Invalid size", "%s = %q: %v", what, str, err))
					case n < CacheMinSize || n > CacheMaxSize:
						l.diags = append(l.diags, errorAt(rng, "Invalid cache size", "%s = %q: a cache's bound is from %s to %s (the default is 10GiB).", what, str, FormatSize(CacheMinSize), FormatSize(CacheMaxSize)))
					}
					c.MaxSize = n
				}
			}
		default:
			l.typeErr(rng, "caches[\""+target+"\"]", "a cache name, or { name = \"...\", sharing = \"...\" }", ev)
			continue
		}
		caches[target] = c
	}
	for _, target := range slices.Sorted(maps.Keys(caches)) {
		c := caches[target]
		if !cleanAbs(target) {
			l.diags = append(l.diags, errorAt(rng, "Invalid cache path", "%q must be an absolute, clean sandbox path such as \"/cache/go-build\".", target))
		}
		for _, r := range reservedTargets {
			if target == r || (r != "/" && strings.HasPrefix(target, r+"/")) {
				l.diags = append(l.diags, errorAt(rng, "Reserved cache path", "%q is reserved: / is the image, /out and /tmp are the step's writable directories, /proc, /dev and /sys belong to the runtime.", target))
			}
		}
		for m := range st.Mounts {
			if m == target || strings.HasPrefix(m, target+"/") || strings.HasPrefix(target, m+"/") {
				l.diags = append(l.diags, errorAt(rng, "Cache over a mount", "cache %q at %q overlaps the mount at %q: an input is read-only and a cache is writable; give them separate paths.", c.Name, target, m))
			}
		}
		if !cacheNameRE().MatchString(c.Name) {
			l.diags = append(l.diags, errorAt(rng, "Invalid cache name", "caches[%q] = %q: a cache name is 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit.", target, c.Name))
		}
		if c.Sharing != CacheShared && c.Sharing != CacheLocked && c.Sharing != CachePrivate {
			l.diags = append(l.diags, errorAt(rng, "Invalid cache sharing", "caches[%q].sharing = %q: want %q (any number of steps at once, the default), %q (one at a time; the others wait) or %q (a step that finds it in use gets an instance of its own).", target, c.Sharing, CacheShared, CacheLocked, CachePrivate))
		}
	}
	st.Caches = caches
}
