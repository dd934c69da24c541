package main

import (
	"bufio"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/foundry-build/foundry/engine/trace"
)

// The report (foundry report) is one HTML file: its styles and script inline, its pictures
// inline SVG, and a Content-Security-Policy that lets it load nothing at all.

//go:embed report.html.tmpl
var reportTemplate string

// outcomeColors are the outcomes' colours, in the report, its SVG and `foundry graph`.
var outcomeColors = map[string]string{
	"executed":    "#2e7d32",
	"cached":      "#64b5f6",
	"built":       "#9ccc65",
	"settled":     "#b0bec5",
	"fetched":     "#ab47bc",
	"skipped":     "#ffb74d",
	"failed":      "#e53935",
	"interrupted": "#8d6e63",
}

// outcomeOrder is the order the report lists outcomes in: what needs attention first.
var outcomeOrder = []string{"failed", "interrupted", "skipped", "executed", "fetched", "built", "cached", "settled"}

// Sizes of the graph's drawing. A graph of more than labelledNodes nodes is drawn as dots
// without labels or edges (each node's title, link and details say which it is), so that
// 10,000 nodes stay a picture a browser opens in a moment.
const (
	labelledNodes = 400
	boxW, boxH    = 220, 22
	dotSize       = 8
)

type reportNode struct {
	*trace.Node
	ID        string // its anchor: n<index>
	Key       string // a step's cache key (or definition digest while pending)
	ExitCode  string
	Evidence  []reportEvidence // its signed provenance, with who signed it
	X, Y      int
	W, H      int
	Label     string
	TrackName string
}

type reportEdge struct{ X1, Y1, X2, Y2 int }

type reportBar struct {
	ID, Title, Color string
	X, W, Y          int
}

type reportGroup struct {
	Outcome string
	Color   string
	Nodes   []*reportNode
	Open    bool
}

type reportCapability struct {
	Name   string
	Events []string
}

type reportView struct {
	*runReport
	Counts      []reportGroup
	Groups      []reportGroup
	Graph       []*reportNode
	Edges       []reportEdge
	EdgesHidden int
	Width       int
	Height      int
	Labelled    bool
	Bars        []reportBar
	TrackNames  []string
	TimelineH   int
	Critical    []*reportNode
	Caps        []reportCapability
	Colors      map[string]string
	Wall        string
}

// writeReportHTML writes rep as the report's HTML.
func writeReportHTML(w io.Writer, rep *runReport) error {
	t, err := template.New("report").Funcs(template.FuncMap{
		"ms":    func(us int64) string { return fmt.Sprintf("%.1f ms", float64(us)/1000) },
		"color": func(o string) string { return cmp.Or(outcomeColors[o], "#888") },
		"add":   func(a, b int) int { return a + b },
		"mul":   func(a, b int) int { return a * b },
		"sub":   func(a, b int64) int64 { return a - b },
		"sub64": func(a, b int) int { return a - b },
	}).Parse(reportTemplate)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if err := t.Execute(bw, viewOf(rep)); err != nil {
		return err
	}
	return bw.Flush()
}

func viewOf(rep *runReport) *reportView {
	v := &reportView{runReport: rep, Colors: outcomeColors, Wall: fmt.Sprintf("%.2f s", float64(rep.WallUS)/1e6)}
	steps := map[string]int{}
	for i, s := range rep.Steps {
		steps[s.Address] = i
	}
	byAddr := map[string]*reportNode{}
	nodes := make([]*reportNode, len(rep.Nodes))
	for i, n := range rep.Nodes {
		rn := &reportNode{Node: n, ID: fmt.Sprintf("n%d", i), Label: n.Address, TrackName: rep.Tracks[strconv.Itoa(n.Track)]}
		if j, ok := steps[n.Address]; ok {
			s := rep.Steps[j]
			rn.Key = string(s.Action)
			rn.Evidence = rep.Evidence[n.Address]
			if s.ExitCode != nil {
				rn.ExitCode = fmt.Sprint(*s.ExitCode)
			}
		}
		nodes[i], byAddr[n.Address] = rn, rn
	}
	for _, o := range outcomeOrder {
		var g []*reportNode
		for _, n := range nodes {
			if n.Outcome == o {
				g = append(g, n)
			}
		}
		if len(g) > 0 {
			v.Counts = append(v.Counts, reportGroup{Outcome: o, Color: outcomeColors[o], Nodes: g})
			v.Groups = append(v.Groups, reportGroup{Outcome: o, Color: outcomeColors[o], Nodes: g, Open: o == "failed" || len(g) <= 50})
		}
	}
	for _, a := range rep.Critical {
		if n := byAddr[a]; n != nil {
			v.Critical = append(v.Critical, n)
		}
	}
	v.layout(nodes, byAddr)
	v.timeline(nodes)
	v.capabilities()
	return v
}

// layout places the nodes in columns by depth (the longest chain of dependencies below
// each), each column wrapped into sub-columns of at most rows nodes, and draws the edges
// when the graph is small enough to label.
func (v *reportView) layout(nodes []*reportNode, byAddr map[string]*reportNode) {
	depth := map[string]int{}
	var depthOf func(a string, seen map[string]bool) int
	depthOf = func(a string, seen map[string]bool) int {
		if d, ok := depth[a]; ok {
			return d
		}
		if seen[a] {
			return 0 // a cycle cannot be in a graph that ran; guard against a damaged summary
		}
		seen[a] = true
		d := 0
		for _, dep := range byAddr[a].Deps {
			if byAddr[dep] != nil {
				d = max(d, depthOf(dep, seen)+1)
			}
		}
		depth[a] = d
		return d
	}
	cols := map[int][]*reportNode{}
	maxDepth := 0
	for _, n := range nodes {
		d := depthOf(n.Address, map[string]bool{})
		cols[d] = append(cols[d], n)
		maxDepth = max(maxDepth, d)
	}
	v.Labelled = len(nodes) <= labelledNodes
	w, h, gapX, gapY, rows := boxW, boxH, 40, 6, 40
	if !v.Labelled {
		w, h, gapX, gapY, rows = dotSize, dotSize, 2, 2, 100
	}
	x := 10
	for d := 0; d <= maxDepth; d++ {
		col := cols[d]
		slices.SortFunc(col, func(a, b *reportNode) int { return cmp.Compare(a.Address, b.Address) })
		for i, n := range col {
			n.X, n.Y, n.W, n.H = x+(i/rows)*(w+gapX), 10+(i%rows)*(h+gapY), w, h
			if v.Labelled && len(n.Label) > 32 {
				n.Label = "…" + n.Label[len(n.Label)-31:]
			}
			v.Height = max(v.Height, n.Y+h+10)
		}
		x += ((len(col)+rows-1)/rows)*(w+gapX) + gapX
	}
	v.Width = max(x, 200)
	v.Graph = nodes
	for _, n := range nodes {
		for _, dep := range n.Deps {
			if d := byAddr[dep]; d != nil {
				if !v.Labelled {
					v.EdgesHidden++
					continue
				}
				v.Edges = append(v.Edges, reportEdge{X1: d.X + d.W, Y1: d.Y + d.H/2, X2: n.X, Y2: n.Y + n.H/2})
			}
		}
	}
}

// timeline draws each node settled on a lane as a bar on its track's row.
func (v *reportView) timeline(nodes []*reportNode) {
	rows := map[int]int{}
	var tracks []int
	for _, n := range nodes {
		if _, ok := rows[n.Track]; !ok {
			tracks = append(tracks, n.Track)
			rows[n.Track] = 0
		}
	}
	slices.Sort(tracks)
	for i, t := range tracks {
		rows[t] = i
		name := v.Tracks[strconv.Itoa(t)]
		if name == "" {
			name = fmt.Sprintf("track %d", t)
		}
		v.TrackNames = append(v.TrackNames, name)
	}
	const width = 1000
	wall := max(v.WallUS, 1)
	for _, n := range nodes {
		x := int(n.StartUS * width / wall)
		bw := max(int((n.EndUS-n.StartUS)*width/wall), 1)
		v.Bars = append(v.Bars, reportBar{ID: n.ID, Title: fmt.Sprintf("%s: %s, %.1f ms", n.Address, n.Outcome, float64(n.EndUS-n.StartUS)/1000),
			Color: outcomeColors[n.Outcome], X: 120 + x, W: bw, Y: 4 + rows[n.Track]*18})
	}
	v.TimelineH = 8 + len(tracks)*18
}

// capabilities groups the run's capability events by capability, in the order they came.
func (v *reportView) capabilities() {
	idx := map[string]int{}
	for _, e := range v.CapabilityEvents {
		i, ok := idx[e.Capability]
		if !ok {
			i = len(v.Caps)
			idx[e.Capability] = i
			v.Caps = append(v.Caps, reportCapability{Name: e.Capability})
		}
		line := strings.ReplaceAll(e.Type, "_", " ")
		if e.Message != "" {
			line += ": " + e.Message
		}
		v.Caps[i].Events = append(v.Caps[i].Events, line)
	}
}
