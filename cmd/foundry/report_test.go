package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/trace/tracetest"
	"github.com/foundry-build/foundry/provenance"
)

// page is what headless Chromium saw of a file it opened.
type page struct {
	console  []string // console errors and uncaught exceptions
	requests []string // every request but the file itself
	nodes    map[string]string
	links    []string // fragment links whose target is missing
	// items are the .receipt, .capability and .evidence elements: each one's data
	// attributes, its class, the address of the node whose row holds it (row) and the
	// capability whose chain holds it (cap), and for a receipt or capability the reason it
	// shows for not verifying (why).
	items []map[string]string
	shot  []byte
	took  time.Duration
}

// openReport writes the report of project dir's last run (with more report flags, such as
// -trust-key) and opens it in Chromium (openInChromium), failing the test on a console
// error, a network request or a link that resolves to nothing.
func openReport(t *testing.T, dir string, flags ...string) *page {
	t.Helper()
	file := filepath.Join(t.TempDir(), "report.html")
	if code, _, errs := foundry(t, dir, append([]string{"report", "-o", file}, flags...)...); code != 0 {
		t.Fatalf("report exited %d: %s", code, errs)
	}
	p := openInChromium(t, file)
	if len(p.console) > 0 || len(p.requests) > 0 || len(p.links) > 0 {
		t.Errorf("console errors %v, requests %v, dangling links %v: want none", p.console, p.requests, p.links)
	}
	return p
}

// openInChromium opens file in headless Chromium, recording console errors, exceptions and
// network requests, the address → outcome of every a.node (data-address, data-outcome),
// the fragment links that resolve to nothing, and a screenshot.
func openInChromium(t *testing.T, file string) *page {
	t.Helper()
	bin := needTool(t, "chromium", "apt-get install chromium (scripts/deps.sh)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	p := &page{nodes: map[string]string{}}
	var mu sync.Mutex
	url := "file://" + file
	// Every event of the tab from its start: console errors and warnings (a refused load
	// is one), uncaught exceptions, log entries of level error, and every request.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				p.console = append(p.console, fmt.Sprintf("console.%s", e.Type))
			}
		case *runtime.EventExceptionThrown:
			p.console = append(p.console, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				p.console = append(p.console, "log: "+e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if e.Request.URL != url && !strings.HasPrefix(e.Request.URL, url+"#") {
				p.requests = append(p.requests, e.Request.URL)
			}
		}
	}))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// Navigate returns once the page has loaded; the browser's own timing says how long
	// that took.
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", file, err)
	}
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByType("navigation")[0].loadEventEnd`))
	if err != nil {
		t.Fatal(err)
	}
	p.took = time.Duration(ms * float64(time.Millisecond))
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[[]map[string]string](`Array.from(document.querySelectorAll("a.node, g.node")).map(a => ({address: a.dataset.address || (a.querySelector("title") || {}).textContent || "", outcome: a.dataset.outcome || ""}))`))
	if err != nil {
		t.Fatal(err)
	}
	if p.links, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("a[href^='#']")).map(a => a.getAttribute("href")).filter(h => !document.getElementById(h.slice(1)))`)); err != nil {
		t.Fatal(err)
	}
	if p.items, err = chromedp.Run(ctx, chromedp.Evaluate[[]map[string]string](`Array.from(document.querySelectorAll(".receipt, .capability, .evidence")).map(e => Object.assign({class: e.className, row: e.closest("tr.row") ? e.closest("tr.row").dataset.address : "", cap: e.closest("tr.capability") ? e.closest("tr.capability").dataset.capability : "", why: e.querySelector(":scope > td > pre.why") ? e.querySelector(":scope > td > pre.why").textContent : ""}, e.dataset))`)); err != nil {
		t.Fatal(err)
	}
	if p.shot, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		p.nodes[n["address"]] = n["outcome"]
	}
	mu.Lock()
	defer mu.Unlock()
	return p
}

// notBlank checks that a screenshot has more than a few colours and that no one colour is
// nearly all of it.
func notBlank(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	counts := map[[4]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}]++
		}
	}
	total, most := 0, 0
	for _, c := range counts {
		total += c
		most = max(most, c)
	}
	if len(counts) < 8 || most > total*98/100 {
		t.Errorf("the screenshot looks blank: %d colours, the commonest %d of %d pixels", len(counts), most, total)
	}
}

// The report of a real run (a step executed, two failed, one skipped, a seed built) opens
// in Chromium with no console error and no request; its graph shows every node with its
// outcome; every link resolves; the screenshot is not blank. The run's trace passes the
// strict check, and its apply span is the run's wall time as the state database has it.
// graph -format svg opens the same way, every node of the graph in it.
func TestReportAndGraphInChromium(t *testing.T) {
	needSandbox(t)
	needTool(t, "dot", "apt-get install graphviz (scripts/deps.sh)")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(failingProject), 0o644); err != nil {
		t.Fatal(err)
	}
	traceFile := filepath.Join(t.TempDir(), "apply.trace.json")
	if r := apply(t, dir, nil, "-trace", traceFile); r.code != exitError {
		t.Fatalf("apply exited %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tracetest.Check(b)
	if err != nil {
		t.Fatalf("apply -trace: %v", err)
	}
	code, stored, _ := foundry(t, dir, "trace")
	if code != 0 || stored != string(b) {
		t.Errorf("foundry trace (exit %d) is not the trace apply -trace wrote", code)
	}
	st, err := state.OpenState(filepath.Join(dir, ".foundry", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(context.Background(), 1)
	st.Close()
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	// The run's row is begun after the lock and recovery and finished before the trace
	// ends: the apply's span holds it, within a second.
	wall := time.Duration(c.Root.Dur) * time.Microsecond
	if rowWall := runs[0].Finished.Sub(runs[0].Started); rowWall > wall || wall-rowWall > time.Second {
		t.Errorf("the apply's span is %v, the run's row %v", wall, rowWall)
	}

	report := filepath.Join(t.TempDir(), "report.html")
	if code, _, errs := foundry(t, dir, "report", "-o", report); code != 0 {
		t.Fatalf("report exited %d: %s", code, errs)
	}
	p := openInChromium(t, report)
	if len(p.console) > 0 || len(p.requests) > 0 {
		t.Errorf("console errors %v, requests %v: want none", p.console, p.requests)
	}
	want := map[string]string{"seed.bb": "built", "step.ok": "executed", "step.bad": "failed", "step.lazy": "failed", "step.after": "skipped"}
	for a, o := range want {
		if p.nodes[a] != o {
			t.Errorf("report graph: %s is %q, want %q (all: %v)", a, p.nodes[a], o, p.nodes)
		}
	}
	if len(p.nodes) != len(want) {
		t.Errorf("report graph has %d nodes, want %d: %v", len(p.nodes), len(want), p.nodes)
	}
	if len(p.links) > 0 {
		t.Errorf("links that resolve to nothing: %v", p.links)
	}
	notBlank(t, p.shot)
	// The step that executed shows its signed provenance, verified, and the project's key
	// as the one that signed it; the failed ones have none.
	keys, err := provenance.LoadVerifiers(filepath.Join(dir, ".foundry", "keys", "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	var signed []string
	for _, it := range p.items {
		if it["class"] == "evidence" {
			signed = append(signed, fmt.Sprintf("%s %s %s %s", it["row"], it["what"], it["verified"], it["signers"]))
		}
	}
	if want := []string{"step.ok " + provenance.PredicateSLSAProvenance + " true " + keys[0].KeyID}; !slices.Equal(signed, want) {
		t.Errorf("the report's evidence: %q, want %q", signed, want)
	}

	svg := filepath.Join(t.TempDir(), "graph.svg")
	code, out, errs := foundry(t, dir, "graph", "-format", "svg")
	if code != 0 {
		t.Fatalf("graph -format svg exited %d: %s", code, errs)
	}
	if err := os.WriteFile(svg, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	g := openInChromium(t, svg)
	if len(g.console) > 0 || len(g.requests) > 0 {
		t.Errorf("svg: console errors %v, requests %v: want none", g.console, g.requests)
	}
	for a := range want {
		if _, ok := g.nodes[a]; !ok {
			t.Errorf("svg has no node %s (%v)", a, g.nodes)
		}
	}
	notBlank(t, g.shot)
}

// The report of the int-sort run that admitted capability.int-sort lists the version it
// published with its evidence chain, verified with the project's key as foundry verify
// does: the admission summary, the sealed test result and provenance, each signed by the
// project's key, in report -json and in the HTML Chromium opens.
func TestReportCapabilityChain(t *testing.T) {
	needSandbox(t)
	needGoToolchain(t)
	dir := copyExample(t, "int-sort")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	keys, err := provenance.LoadVerifiers(filepath.Join(dir, ".foundry", "keys", "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keyID := keys[0].KeyID
	code, out, errs := foundry(t, dir, "report", "-json")
	var rep runReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("report -json: exit %d: %s", code, errs)
	}
	admitted := ""
	for _, e := range rep.CapabilityEvents {
		if e.Type == "capability_admitted" {
			admitted = e.Ref
		}
	}
	if len(rep.Capabilities) != 1 || rep.Capabilities[0].Capability != "capability.int-sort" || rep.Capabilities[0].Ref != admitted || rep.Capabilities[0].How != "admitted" ||
		admitted == "" || !rep.Capabilities[0].Verified {
		t.Fatalf("report -json capabilities: %+v, want capability.int-sort as admitted (%s), verified", rep.Capabilities, admitted)
	}
	want := []string{provenance.PredicateVSA, provenance.PredicateTestResult, provenance.PredicateSLSAProvenance}
	signed := map[string]string{}
	for _, e := range rep.Capabilities[0].Evidence {
		if e.Verified && len(e.SignedBy) == 1 {
			signed[e.What] = e.SignedBy[0].KeyID
		}
	}
	for _, w := range want {
		if signed[w] != keyID {
			t.Errorf("report -json: capability.int-sort's %s signed by %q, want %s (all: %v)", w, signed[w], keyID, signed)
		}
	}

	p := openReport(t, dir)
	var caps []string
	shown := map[string]string{}
	for _, it := range p.items {
		switch {
		case it["class"] == "capability":
			caps = append(caps, it["capability"]+" "+it["verified"])
		case it["class"] == "evidence" && it["cap"] != "" && it["verified"] == "true":
			shown[it["cap"]+" "+it["what"]] = it["signers"]
		}
	}
	if !slices.Equal(caps, []string{"capability.int-sort true"}) {
		t.Errorf("the report's capabilities: %v, want capability.int-sort verified", caps)
	}
	for _, w := range want {
		if shown["capability.int-sort "+w] != keyID {
			t.Errorf("the report shows capability.int-sort's %s signed by %q, want %s (all: %v)", w, shown["capability.int-sort "+w], keyID, shown)
		}
	}
}

// A report of 10,000 nodes stays small enough and opens quickly: measured, logged, and
// held to bounds that would catch a drawing grown out of hand.
func TestReportOfTenThousandNodes(t *testing.T) {
	const n = 10000
	rep := &runReport{Summary: trace.Summary{Run: "r-big", Status: "succeeded", Started: time.Now(), WallUS: 60e6,
		Counts: map[string]int{}, Tracks: map[string]string{"2": "slot 1", "3": "slot 2"}}}
	outcomes := []string{"executed", "cached", "built", "failed", "skipped"}
	for i := range n {
		node := &trace.Node{Address: fmt.Sprintf("module.m%d.step.s%d", i%50, i), Kind: "step", Outcome: outcomes[i%len(outcomes)],
			StartUS: int64(i) * 5000, EndUS: int64(i)*5000 + 4000, Track: 2 + i%2}
		if i >= 100 {
			node.Deps = []string{fmt.Sprintf("module.m%d.step.s%d", (i-100)%50, i-100)}
		}
		rep.Nodes = append(rep.Nodes, node)
		rep.Counts[node.Outcome]++
	}
	file := filepath.Join(t.TempDir(), "big.html")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := writeReportHTML(f, rep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wrote := time.Since(start)
	fi, _ := os.Stat(file)
	p := openInChromium(t, file)
	t.Logf("10,000 nodes: %d KiB written in %v, opened in Chromium in %v", fi.Size()>>10, wrote, p.took)
	if fi.Size() > 16<<20 || p.took > 30*time.Second {
		t.Errorf("10,000 nodes: %d bytes, %v to open: too big or too slow", fi.Size(), p.took)
	}
	if len(p.nodes) != n || len(p.console) > 0 || len(p.requests) > 0 || len(p.links) > 0 {
		t.Errorf("10,000 nodes: %d drawn, console %v, requests %v, dangling links %d", len(p.nodes), p.console, p.requests, len(p.links))
	}
	notBlank(t, p.shot)
}

// foundry trace and foundry report name the run they cannot read; gc removes the traces of
// the runs it prunes and keeps the others'.
func TestTracesOfPrunedRunsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	project := `
seed "host" {
  layer { files = { "/marker" = "host" } }
  env = { PATH = "/usr/bin:/bin" }
}
step "s" {
  image   = seed.host
  run     = ["sh", "-c", "echo $RANDOM_ARG > $FOUNDRY_OUT/o"]
  env     = { RANDOM_ARG = "%d" }
  outputs = ["/out/o"]
}
`
	if code, _, errs := foundry(t, dir, "trace"); code != exitError || !strings.Contains(errs, "nothing has been applied") {
		t.Errorf("trace before any apply: exit %d: %s", code, errs)
	}
	var ids []string
	for i := range 2 {
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(project, i)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(foundryBin, "apply", "-auto-approve", "-executor", "local", "-unsandboxed", "-progress", "plain")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		code, out, errs := foundry(t, dir, "report", "-json")
		var rep runReport
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("report -json: exit %d: %s", code, errs)
		}
		ids = append(ids, rep.Run)
	}
	if code, _, errs := foundry(t, dir, "report", "r20000101t000000-00000000"); code != exitError || !strings.Contains(errs, "no run r20000101t000000-00000000") {
		t.Errorf("report of an unknown run: exit %d: %s", code, errs)
	}
	if code, _, errs := foundry(t, dir, "gc", "-keep-runs", "1"); code != 0 {
		t.Fatalf("gc: exit %d: %s", code, errs)
	}
	if code, _, errs := foundry(t, dir, "trace", ids[0]); code != exitError || !strings.Contains(errs, "no run") {
		t.Errorf("trace of the pruned run: exit %d: %s", code, errs)
	}
	for _, name := range []string{ids[0] + ".json", ids[0] + ".summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, ".foundry", "traces", name)); !os.IsNotExist(err) {
			t.Errorf("%s of the pruned run is still there (%v)", name, err)
		}
	}
	if code, out, errs := foundry(t, dir, "trace", ids[1]); code != 0 {
		t.Errorf("trace of the kept run: exit %d: %s", code, errs)
	} else if _, err := tracetest.Check([]byte(out)); err != nil {
		t.Errorf("trace of the kept run: %v", err)
	}
}

// GET /runs/RUN answers the summary runReportOf reads, latest for the newest; a run it does
// not have and a path that is no run ID are 404 problems; other methods are not served.
func TestServeRunSummary(t *testing.T) {
	h, err := newServeHandler("p", nil, nil, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	asked := []string{}
	h.report = func(_ context.Context, run string) (*runReport, error) {
		asked = append(asked, run)
		if run != "" && run != "r1" {
			return nil, fmt.Errorf("no run %s in this project", run)
		}
		return &runReport{Summary: trace.Summary{Run: "r1", Status: "succeeded"}}, nil
	}
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/runs/r1", 200, `"run":"r1"`},
		{"GET", "/runs/latest", 200, `"status":"succeeded"`},
		{"GET", "/runs/r2", 404, "no run r2"},
		{"GET", "/runs/..%2f..%2fetc", 404, "not a run ID"},
		{"POST", "/runs/r1", 404, "no such resource"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, rec.Code, rec.Body, tc.status, tc.body)
		}
	}
	if want := []string{"r1", "", "r2"}; !slices.Equal(asked, want) {
		t.Errorf("runs read %q, want %q", asked, want)
	}
}

// graph -format svg draws each recipe and each module instance as a Graphviz cluster
// labelled with its address: int-sort's two recipes, matrix's two module instances.
func TestGraphSVGClusters(t *testing.T) {
	needTool(t, "dot", "apt-get install graphviz (scripts/deps.sh)")
	cluster := regexp.MustCompile(`<g id="clust\d+" class="cluster">\s*<title>cluster_\d+</title>[^<]*<path[^>]*/>\s*<text[^>]*>([^<]*)</text>`)
	for example, want := range map[string][]string{
		"int-sort": {"recipe.int-sort-go", "recipe.int-sort-set"},
		"matrix":   {`module.sum["linux/amd64"]`, `module.sum["linux/arm64"]`},
	} {
		dir := copyExample(t, example)
		code, out, errs := foundry(t, dir, "graph", "-format", "svg")
		if code != 0 {
			t.Fatalf("%s: graph -format svg exited %d: %s", example, code, errs)
		}
		var got []string
		for _, m := range cluster.FindAllStringSubmatch(out, -1) {
			got = append(got, html.UnescapeString(m[1]))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: clusters %q, want %q", example, got, want)
		}
	}
}

// checkPinnedChain checks the report of project dir's last run, which pinned capability to
// ref, a version another project admitted with the key parentPub (a path from dir), end to
// end through the CLI. With -trust-key parentPub its chain verifies as an admitted one does:
// the admission summary, the sealed test results and the provenance, each signed by that
// key, in report -json and in the HTML. Without -trust-key, or with another key, the report
// is still written and shows the version NOT VERIFIED, with the reason.
func checkPinnedChain(t *testing.T, dir, capability, ref, parentPub string) {
	t.Helper()
	keys, err := provenance.LoadVerifiers(filepath.Join(dir, parentPub))
	if err != nil {
		t.Fatal(err)
	}
	keyID := keys[0].KeyID
	reportJSON := func(flags ...string) runReport {
		t.Helper()
		code, out, errs := foundry(t, dir, append([]string{"report", "-json"}, flags...)...)
		var rep runReport
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("report -json %v: exit %d: %s", flags, code, errs)
		}
		if len(rep.Capabilities) != 1 || rep.Capabilities[0].Capability != capability || rep.Capabilities[0].How != "pinned" || rep.Capabilities[0].Ref != ref {
			t.Fatalf("report -json %v capabilities: %+v, want %s pinned to %s", flags, rep.Capabilities, capability, ref)
		}
		return rep
	}
	want := []string{provenance.PredicateVSA, provenance.PredicateTestResult, provenance.PredicateSLSAProvenance}

	trusted := reportJSON("-trust-key", parentPub).Capabilities[0]
	signed := map[string]string{}
	for _, e := range trusted.Evidence {
		if e.Verified && len(e.SignedBy) == 1 {
			signed[e.What] = e.SignedBy[0].KeyID
		}
	}
	if !trusted.Verified || trusted.Why != "" {
		t.Errorf("report -json -trust-key: %s not verified: %s", capability, trusted.Why)
	}
	for _, w := range want {
		if signed[w] != keyID {
			t.Errorf("report -json -trust-key: %s's %s signed by %q, want the admitting project's %s (all: %v)", capability, w, signed[w], keyID, signed)
		}
	}
	p := openReport(t, dir, "-trust-key", parentPub)
	var rows []string
	shown := map[string]string{}
	for _, it := range p.items {
		switch {
		case it["class"] == "capability":
			rows = append(rows, it["capability"]+" "+it["how"]+" "+it["verified"])
		case it["class"] == "evidence" && it["cap"] == capability && it["verified"] == "true":
			shown[it["what"]] = it["signers"]
		}
	}
	if !slices.Equal(rows, []string{capability + " pinned true"}) {
		t.Errorf("the report's capabilities with -trust-key: %v, want %s pinned, verified", rows, capability)
	}
	for _, w := range want {
		if shown[w] != keyID {
			t.Errorf("the report shows %s's %s signed by %q, want %s (all: %v)", capability, w, shown[w], keyID, shown)
		}
	}

	// Without the admitting project's key, and with a key of no one's, the version does not
	// verify: the report says why, and nothing in its chain is shown as signed.
	other := filepath.Join(t.TempDir(), "other")
	if code, _, errs := foundry(t, dir, "keygen", "-out", other); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	for _, flags := range [][]string{nil, {"-trust-key", other + ".pub"}} {
		c := reportJSON(flags...).Capabilities[0]
		if c.Verified || !strings.Contains(c.Why, "signature-invalid") {
			t.Errorf("report -json %v: %s verified %v, why %q: want not verified, no signature verifying", flags, capability, c.Verified, c.Why)
		}
		for _, e := range c.Evidence {
			if e.Verified || len(e.SignedBy) != 0 {
				t.Errorf("report -json %v: %s's %s verified %v, signed by %v: want neither", flags, capability, e.What, e.Verified, e.SignedBy)
			}
		}
		t.Logf("report %v: %s: %s", flags, capability, c.Why)
		p := openReport(t, dir, flags...)
		rows = nil
		for _, it := range p.items {
			if it["class"] == "capability" {
				rows = append(rows, it["capability"]+" "+it["how"]+" "+it["verified"]+" "+it["why"])
			}
		}
		if w := capability + " pinned false " + c.Why; !slices.Equal(rows, []string{w}) {
			t.Errorf("the report's capabilities %v: %q, want %q", flags, rows, w)
		}
	}
}
