package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cacheSecretProbe prints each file outside /proc, /sys and /dev that holds the secret
// step.put leaves in the cache "go-build". The secret is spelled in two halves joined at run
// time, so that no script holding the probe matches it.
const cacheSecretProbe = `s=cache-; s="${s}secret-4f1c"
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null | xargs -r grep -l "$s" 2>/dev/null`

// cacheBuilderFiles are the fixture's builder directory additions: probe.sh (the probe, for
// step.control, which mounts the cache), and a builder that runs the probe, says what it
// saw, and proposes a correct sorter that runs the probe too, each time it is called, and
// answers a string instead of the sorted array if it sees the secret, which fails its
// evaluation.
var cacheBuilderFiles = map[string]string{
	"probe.sh": "#!/bin/sh\n" + cacheSecretProbe + "\n",
	"cache-builder.sh": `#!/bin/sh
set -e
seen=$(sh /src/probe.sh || true)
echo "OBSERVED cache: ${seen:-nothing}" >&2
cat > /out/sorter <<'SORTER'
#!/bin/sh
` + cacheSecretProbe + ` | grep -q . && { echo '"saw the cache"'; exit 0; }
tr -d '[] \n' | tr ',' '\n' | sort -n | paste -sd, - | sed 's/^/[/; s/$/]/'
SORTER
chmod 755 /out/sorter
`,
}

// cacheSteps are step.put, which writes the secret into the cache "go-build" on seed.bb,
// and step.control, which mounts the same cache after it and runs the probe: it shows
// that the probe finds the secret where the cache is mounted.
const cacheSteps = `
step "put" {
  image   = seed.bb
  caches  = { "/cache" = "go-build" }
  run     = ["sh", "-c", "s=cache-; echo \"$${s}secret-4f1c\" > /cache/secret && echo done > /out/done"]
  outputs = ["/out/done"]
}

step "control" {
  image   = seed.bb
  caches  = { "/cache" = "go-build" }
  mounts  = { "/after" = step.put.output["/out/done"], "/src" = dir("builder") }
  run     = ["sh", "-c", "sh /src/probe.sh > /out/found || true"]
  outputs = ["/out/found"]
}
`

// A cache volume of the project, on the very image the reconstruction's builder runs on,
// holding a secret a step left there, is seen neither by the builder nor by the evaluation
// of its candidate (the candidate looks for it on every case it is run on, and answers
// wrongly if it finds it), while a step that mounts the cache finds it with the same probe.
// Under runc and containerd.
func TestCacheUnseenByBuilderAndEvaluator(t *testing.T) {
	for _, ex := range []string{"runc", "containerd"} {
		t.Run(ex, func(t *testing.T) {
			if ex == "containerd" {
				needContainerd(t)
			}
			dir := newReconstructFixture(t, "1",
				`"chmod", "grep"]`, `"chmod", "grep", "find", "xargs"]`,
				`run     = ["sh", "/src/propose.sh"]`, `run     = ["sh", "/src/cache-builder.sh"]`)
			for name, text := range cacheBuilderFiles {
				if err := os.WriteFile(filepath.Join(dir, "builder", name), []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.OpenFile(filepath.Join(dir, "main.hcl"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(cacheSteps); err != nil {
				t.Fatal(err)
			}
			f.Close()

			// The cache is filled, and the probe finds the secret where it is mounted.
			if r := apply(t, dir, nil, "-executor", ex, "-progress", "plain", "-target", "step.control"); r.code != 0 {
				t.Fatalf("apply -target step.control: exit %d\n%s", r.code, r.stderr)
			}
			if _, found, _ := foundry(t, dir, "output", "step.control", "/out/found"); strings.TrimSpace(found) != "/cache/secret" {
				t.Fatalf("the probe, in a step that mounts the cache, found %q, want /cache/secret", found)
			}

			// One candidate: admitted only if neither the builder nor any evaluation saw it.
			r := apply(t, dir, nil, "-executor", ex, "-progress", "plain")
			if _, obs := jobObserved(t, dir, 1); !slices.Equal(results(obs, "cache"), []string{"nothing"}) {
				t.Errorf("the builder saw %q of the cache", results(obs, "cache"))
			}
			if r.code != 0 {
				t.Fatalf("apply: exit %d (the candidate saw the cache in an evaluation?)\n%s", r.code, r.stderr)
			}
			saysAll(t, "apply", r.stderr, "ADM capability.sorter: reconstruct round 1 admitted as")
		})
	}
}
