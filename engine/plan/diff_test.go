package plan

import (
	"strings"
	"testing"
)

// The definitions explain compares: a previous and a current definition differ in the
// smallest paths whose values differ.
func TestDiffJSON(t *testing.T) {
	old := []byte(`{"argv":["go","build","-o","/out/x"],"inputs":{"/src":{"digest":"sha256:aa"}},"limits":{"memory":1024}}`)
	cur := []byte(`{"argv":["go","build","-trimpath","/out/x"],"inputs":{"/src":{"digest":"sha256:bb"}},"limits":{"memory":2048}}`)
	ch, err := DiffJSON(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, c.Path)
	}
	if want := `argv[2] inputs["/src"].digest limits.memory`; strings.Join(got, " ") != want {
		t.Fatalf("changed paths %q, want %q", got, want)
	}
	if ch[1].Kind != Changed || string(ch[1].New) != `"sha256:bb"` {
		t.Fatalf("change %+v", ch[1])
	}
}

func TestDiffJSONNested(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []string // "kind path"
	}{
		{"equal", `{"a":[1,{"b":null}]}`, `{"a":[1,{"b":null}]}`, nil},
		{"number text", `{"n":1}`, `{"n":1.0}`, []string{"changed n"}},
		{"nested object in array", `{"mounts":[{"at":"/src","digest":"sha256:1"},{"at":"/lib","ro":true}]}`,
			`{"mounts":[{"at":"/src","digest":"sha256:2"},{"at":"/lib","ro":false}]}`,
			[]string{"changed mounts[0].digest", "changed mounts[1].ro"}},
		{"array grows and shrinks", `{"argv":["a","b","c"],"env":["X=1"]}`, `{"argv":["a","b"],"env":["X=1","Y=2"]}`,
			[]string{"removed argv[2]", "added env[1]"}},
		{"members added and removed", `{"limits":{"memory":"1GiB","time":"5m"}}`, `{"limits":{"memory":"1GiB","pids":64}}`,
			[]string{"added limits.pids", "removed limits.time"}},
		{"type change", `{"network":"none"}`, `{"network":{"hosts":["x"]}}`, []string{"changed network"}},
		{"odd names", `{"env":{"A B":"1","":"2","x\"y":"3"}}`, `{"env":{"A B":"9","":"8","x\"y":"7"}}`,
			[]string{`changed env[""]`, `changed env["A B"]`, `changed env["x\"y"]`}},
		{"root", `1`, `[1]`, []string{"changed $"}},
		{"deep", `{"a":{"b":[[{"c":1}]]}}`, `{"a":{"b":[[{"c":2}]]}}`, []string{"changed a.b[0][0].c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, err := DiffJSON([]byte(c.old), []byte(c.new))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range ch {
				got = append(got, string(x.Kind)+" "+x.Path)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	ch, _ := DiffJSON([]byte(`{"argv":["a","<b>"]}`), []byte(`{"argv":["a","c"]}`))
	if len(ch) != 1 || string(ch[0].Old) != `"<b>"` || string(ch[0].New) != `"c"` {
		t.Fatalf("values = %+v", ch)
	}
	if _, err := DiffJSON([]byte(`{`), []byte(`{}`)); err == nil {
		t.Fatal("accepted malformed JSON")
	}
	if _, err := DiffJSON([]byte(`{} {}`), []byte(`{}`)); err == nil {
		t.Fatal("accepted trailing data")
	}
}
