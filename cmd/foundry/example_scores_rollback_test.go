package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/deliver"
)

// scoresDefect is release 2's known defect, put into examples/scores/src/start: on its
// first start against a store it "compacts" every stored list and, in doing so, drops
// duplicate scores (sort -u). Acceptance does not see it: each case starts on an empty
// volume, so the first start has nothing to compact and a restart finds the marker. A user
// upgrading from release 1 does: the lists release 1 stored lose their duplicates.
const scoresDefect = `
# Release 2: compact the stored lists once, on the first start against a store.
if [ ! -e "$1/scores/.compacted" ]; then
	for f in "$1/scores"/*; do
		[ -f "$f" ] || continue
		"$here/bin/busybox" tr -d '[] ' < "$f" | "$here/bin/busybox" tr ',' '\n' | "$here/bin/busybox" sort -un |
			"$here/bin/busybox" tr '\n' ',' | "$here/bin/busybox" sed 's/,$//; s/.*/[&]/' > "$f.new" && mv "$f.new" "$f"
	done
	: > "$1/scores/.compacted"
fi
`

// exampleScoresRollback is blueprint stage 6 on examples/scores, after TestExampleScores
// delivered release 1 to dest and a fresh user stored list 1 = [5,3,5,-1] in its data:
// release 2, which carries scoresDefect, passes acceptance and is delivered; started from
// DEST/current as the user would, it serves list 1 without its duplicate. A rollback to
// release 1 is refused while release 1's acceptance evidence does not verify; once it
// does, `foundry release rollback` re-points the channel, and release 1 started again from
// DEST/current serves list 1 as it was stored, and not what release 2 stored.
func exampleScoresRollback(t *testing.T, dir, dest string, args []string, src string) {
	start := filepath.Join(dir, "src", "start")
	defective := strings.Replace(src, "\nexec ", scoresDefect+"exec ", 1)
	if defective == src {
		t.Fatal("src/start no longer ends with the exec this test puts the defect before")
	}
	if err := os.WriteFile(start, []byte(defective), 0o755); err != nil {
		t.Fatal(err)
	}
	hex1 := releases(t, dest)[0]
	r := apply(t, dir, nil, args...)
	acc := acceptEvents(t, r.stderr)["product.scores"]
	if r.code != 0 || acc.Type != "product_accepted" || acc.CasesPassed != 2 {
		t.Fatalf("apply of release 2: exit %d, acceptance %+v\n%s\n%s", r.code, acc, r.stdout, r.stderr)
	}
	var hex2 string
	for _, h := range releases(t, dest) {
		if h != hex1 {
			hex2 = h
		}
	}
	current := filepath.Join(dest, deliver.CurrentLink)
	if l, _ := os.Readlink(current); hex2 == "" || l != hex2 {
		t.Fatalf("release 2 was not delivered as current: %v, current -> %s", releases(t, dest), l)
	}

	// The defect, observed through the interface of the release as delivered.
	files := filepath.Join(current, deliver.FilesDir)
	base, stop := startRelease(t, files, "../data")
	if got := httpDo(t, "GET", base+"/cgi-bin/scores?id=1", ""); got != "200 [-1,3,5]" {
		stop()
		t.Fatalf("release 2 should serve list 1 damaged by its defect: %s", got)
	}
	if got := httpDo(t, "POST", base+"/cgi-bin/scores", "[9, 9]"); got != "201 {\"id\":2}" {
		t.Errorf("release 2, upload: %s", got)
	}
	stop()

	// Release 1's acceptance evidence no longer verifies (a byte of an envelope changed):
	// the rollback is refused and nothing changes.
	evidence, _ := filepath.Glob(filepath.Join(dest, hex1, deliver.EvidenceDir, "*.intoto.json"))
	if len(evidence) == 0 {
		t.Fatalf("release 1 has no evidence in %s", filepath.Join(dest, hex1, deliver.EvidenceDir))
	}
	good, err := os.ReadFile(evidence[0])
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(evidence[0], 0o644)
	if err := os.WriteFile(evidence[0], []byte(strings.Replace(string(good), `"payload":"`, `"payload":"e`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := foundry(t, dir, "release", "rollback", "scores")
	if code != exitError || !strings.Contains(errs, "does not verify") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("rollback to release 1 with its evidence tampered: exit %d\n%s\n%s", code, out, errs)
	}
	if l, _ := os.Readlink(current); l != hex2 {
		t.Fatalf("a refused rollback moved current to %s", l)
	}
	if err := os.WriteFile(evidence[0], good, 0o444); err != nil {
		t.Fatal(err)
	}

	code, out, errs = foundry(t, dir, "release", "rollback", "scores")
	if code != exitOK || !strings.Contains(out, "Rolled product.scores") || !strings.Contains(out, "to sha256:"+hex1+" (verified)") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errs)
	}
	if l, _ := os.Readlink(current); l != hex1 {
		t.Fatalf("after the rollback current -> %s, want release 1 %s", l, hex1)
	}

	// Release 1, started again from DEST/current, serves the data it stored, whole.
	base, stop = startRelease(t, files, "../data")
	defer stop()
	if got := httpDo(t, "GET", base+"/cgi-bin/scores?id=1", ""); got != "200 [-1,3,5,5]" {
		t.Errorf("after the rollback, list 1: %s", got)
	}
	if got := httpDo(t, "GET", base+"/cgi-bin/scores?id=2", ""); got != "404 {\"error\":\"not_found\"}" {
		t.Errorf("after the rollback, list 2 (stored by release 2) should not be release 1's: %s", got)
	}
	// Release 2's data stays as it left it, for inspection.
	if b, _ := os.ReadFile(filepath.Join(dest, hex2, deliver.DataDir, "scores", "1")); string(b) != "[-1,3,5]" {
		t.Errorf("release 2's data/scores/1: %q", b)
	}
}
