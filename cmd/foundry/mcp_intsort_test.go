package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The int-sort example's capability, admitted by an apply, called as the tool cap_int-sort
// by both clients over stdio: the same schema (the contract's, wrapped as "input"), the same
// results, the same refusals. The go-sdk client also sends what a JavaScript client cannot
// carry exactly (the 64-bit endpoints, 3.0), and gets them back exactly.
func TestMCPIntSort(t *testing.T) {
	needSandbox(t)
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs the Go toolchain at /usr/local/go for the example's seed")
		}
		t.Skip("needs /usr/local/go")
	}
	bin := inspectorBin(t)
	dir := copyExample(t, "int-sort")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: %s%s", r.stdout, r.stderr)
	}
	_, capsJSON, _ := foundry(t, dir, "capabilities", "-json")
	var caps []struct {
		Contract string `json:"contract_digest"`
	}
	if json.Unmarshal([]byte(capsJSON), &caps); len(caps) != 1 {
		t.Fatalf("capabilities: %s", capsJSON)
	}
	cs := connectStdio(t, dir)

	var tool map[string]any
	for _, tl := range listTools(t, cs) {
		if tl.Name == "cap_int-sort" {
			tool = normalized(t, tl).(map[string]any)
		}
	}
	if tool == nil {
		t.Fatal("no cap_int-sort tool")
	}
	if d, _ := tool["description"].(string); !strings.Contains(d, caps[0].Contract) {
		t.Errorf("the description does not name the contract %s: %s", caps[0].Contract, d)
	}
	schema, _ := os.ReadFile(dir + "/schemas/int-list.json")
	var contract map[string]any
	json.Unmarshal(schema, &contract)
	delete(contract, "$schema") // metadata Lower drops
	for f, field := range map[string]string{"inputSchema": "input", "outputSchema": "output"} {
		want := map[string]any{"type": "object", "properties": map[string]any{field: contract}, "required": []any{field}, "additionalProperties": false}
		if !reflect.DeepEqual(tool[f], normalized(t, want)) {
			t.Errorf("%s %v, want the contract's schema wrapped as %q: %v", f, tool[f], field, want)
		}
	}

	// Both clients. args is the input as JSON text; want the text of the result.
	for _, tc := range []struct {
		input, want string
		isError     bool
	}{
		{`[3,1,2,2]`, `{"output":[1,2,2,3]}`, false},
		{`[]`, `{"output":[]}`, false},
		{`[5,-7,0]`, `{"output":[-7,0,5]}`, false},
		{`[7,7,7]`, `{"output":[7,7,7]}`, false},
		{`"not a list"`, "got string, want array", true},
		{`[1.5]`, "got number, want integer", true},
		{`[1,"a"]`, "got string, want integer", true},
		{`{"x":1}`, "got object, want array", true},
		{`[` + strings.Repeat("1,", 10000) + `1]`, "maxItems", true},
	} {
		goRes := callTool(t, cs, "cap_int-sort", map[string]any{"input": json.RawMessage(tc.input)})
		if goRes.IsError != tc.isError || !strings.Contains(resultText(goRes), tc.want) {
			t.Errorf("go-sdk %.40s: isError %v, %.300s; want %v, %s", tc.input, goRes.IsError, resultText(goRes), tc.isError, tc.want)
		}
		code, jsRes, errs := inspect(t, bin, dir, "--method", "tools/call", "--tool-name", "cap_int-sort", "--tool-arg", "input="+tc.input)
		if jsRes == nil || (code == 0) == tc.isError {
			t.Errorf("Inspector %.40s: exit %d, %v\n%s", tc.input, code, jsRes, errs)
			continue
		}
		g := normalized(t, goRes).(map[string]any)
		for _, f := range []string{"content", "structuredContent", "isError"} {
			if !reflect.DeepEqual(g[f], jsRes[f]) {
				t.Errorf("%.40s: %s: go-sdk %v, Inspector %v", tc.input, f, g[f], jsRes[f])
			}
		}
	}

	// What only exact JSON numbers carry: the endpoints, and an integral decimal.
	for _, tc := range []struct{ input, want string }{
		{`[9223372036854775807,-9223372036854775808,0,9223372036854775806]`, `{"output":[-9223372036854775808,0,9223372036854775806,9223372036854775807]}`},
		{`[3.0,-1,2e0]`, `{"output":[-1,2,3]}`},
	} {
		res := callTool(t, cs, "cap_int-sort", map[string]any{"input": json.RawMessage(tc.input)})
		if res.IsError || resultText(res) != tc.want {
			t.Errorf("%s: isError %v, %s; want %s", tc.input, res.IsError, resultText(res), tc.want)
		}
	}
	// Beyond the endpoints: refused by the contract's bounds, before anything runs.
	if res := callTool(t, cs, "cap_int-sort", map[string]any{"input": json.RawMessage(`[9223372036854775808]`)}); !res.IsError || !strings.Contains(resultText(res), "maximum") {
		t.Errorf("2^63: %s", resultText(res))
	}
	if res := callTool(t, cs, "cap_int-sort", map[string]any{"list": []int{1}}); !res.IsError || !strings.Contains(resultText(res), `exactly one property, "input"`) {
		t.Errorf("arguments without input: %s", resultText(res))
	}
}
