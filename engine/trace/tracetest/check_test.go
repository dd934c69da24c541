package tracetest

import (
	"strings"
	"testing"
)

const meta = `{"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"apply"}},{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"slot 1"}},`
const root = `{"name":"apply r","cat":"apply","ph":"X","ts":0,"dur":100,"pid":1,"tid":0},`

// The checker takes a trace that keeps the rules and refuses each way of breaking them.
func TestCheckRefusesWhatBreaksTheFormat(t *testing.T) {
	wrap := func(evs string) string {
		return `{"traceEvents":[` + meta + root + strings.TrimSuffix(evs, ",") + `],"displayTimeUnit":"ms"}`
	}
	good := wrap(`{"name":"a","cat":"node","ph":"X","ts":10,"dur":50,"pid":1,"tid":2},{"name":"run","ph":"X","ts":20,"dur":30,"pid":1,"tid":2},{"name":"b","ph":"X","ts":60,"dur":40,"pid":1,"tid":2},{"name":"hit","ph":"i","s":"t","ts":5,"pid":1,"tid":0},` +
		`{"name":"w","cat":"waiting","ph":"b","id":"a","ts":0,"pid":1,"tid":0},{"name":"w","cat":"waiting","ph":"e","id":"a","ts":45,"pid":1,"tid":0},`)
	if _, err := Check([]byte(good)); err != nil {
		t.Fatalf("a good trace: %v", err)
	}
	for name, tc := range map[string]struct{ trace, want string }{
		"overlap":         {wrap(`{"name":"a","ph":"X","ts":10,"dur":50,"pid":1,"tid":2},{"name":"b","ph":"X","ts":40,"dur":30,"pid":1,"tid":2},`), "without nesting"},
		"outside":         {wrap(`{"name":"a","ph":"X","ts":90,"dur":20,"pid":1,"tid":2},`), "outside the apply"},
		"unknown field":   {wrap(`{"name":"a","ph":"X","ts":10,"dur":5,"pid":1,"tid":2,"colour":"red"},`), "undocumented field"},
		"no dur":          {wrap(`{"name":"a","ph":"X","ts":10,"pid":1,"tid":2},`), "needs a dur"},
		"bad phase":       {wrap(`{"name":"a","ph":"Q","ts":10,"pid":1,"tid":2},`), "phase"},
		"unnamed track":   {wrap(`{"name":"a","ph":"X","ts":10,"dur":5,"pid":1,"tid":7},`), "no thread_name"},
		"fractional":      {wrap(`{"name":"a","ph":"X","ts":10.5,"dur":5,"pid":1,"tid":2},`), "whole microseconds"},
		"unended B":       {wrap(`{"name":"a","ph":"B","ts":10,"pid":1,"tid":2},`), "never end"},
		"async no id":     {wrap(`{"name":"w","cat":"waiting","ph":"b","ts":10,"pid":1,"tid":0},`), "needs a cat and a string id"},
		"async unended":   {wrap(`{"name":"w","cat":"waiting","ph":"b","id":"a","ts":10,"pid":1,"tid":0},`), "never end"},
		"async no begin":  {wrap(`{"name":"w","cat":"waiting","ph":"e","id":"a","ts":10,"pid":1,"tid":0},`), "no begin"},
		"async outside":   {wrap(`{"name":"w","cat":"waiting","ph":"b","id":"a","ts":10,"pid":1,"tid":0},{"name":"w","cat":"waiting","ph":"e","id":"a","ts":200,"pid":1,"tid":0},`), "outside the apply"},
		"bad scope":       {wrap(`{"name":"a","ph":"i","s":"x","ts":10,"pid":1,"tid":2},`), "scope"},
		"top-level":       {`{"traceEvents":[` + meta + strings.TrimSuffix(root, ",") + `],"extra":1}`, "undocumented top-level"},
		"no root":         {`{"traceEvents":[` + strings.TrimSuffix(meta, ",") + `]}`, "one apply span"},
		"two roots":       {wrap(root), "one apply span"},
		"not an object":   {`[]`, "not a JSON object"},
		"displayTimeUnit": {`{"traceEvents":[` + meta + strings.TrimSuffix(root, ",") + `],"displayTimeUnit":"s"}`, "displayTimeUnit"},
	} {
		_, err := Check([]byte(tc.trace))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
