package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What is admitted is what is called (issue 29): a capability whose entrypoint is a shell
// script, with no shell among its files (its package's base image has /bin/sh), passes its
// sealed suite on its files over that base and is admitted binding that image by digest;
// foundry serve and the MCP tool then call it on the same image, and succeed. A workspace
// that no longer holds the bound image refuses the call, saying why, rather than running
// the files on anything else.
func TestAdmittedImageIsWhatIsCalled(t *testing.T) {
	needSandbox(t)
	dir := writeMCPProject(t)
	main := strings.Replace(mcpProjectFiles["main.hcl"], `    run     = ["sh", "-c", "mkdir -p /out/bin && cp /src/echo-json /out/bin/echo-json && chmod 755 /out/bin/echo-json && cp /bin/busybox /out/bin/sh"]
    outputs = ["/out/bin/echo-json", "/out/bin/sh"]
  }
  # No base: an admitted capability runs on its files alone, so it brings its shell.
  package {
    files = { "/bin/echo-json" = step.build.output["/out/bin/echo-json"], "/bin/sh" = step.build.output["/out/bin/sh"] }
  }`, `    run     = ["sh", "-c", "mkdir -p /out/bin && cp /src/echo-json /out/bin/echo-json && chmod 755 /out/bin/echo-json"]
    outputs = ["/out/bin/echo-json"]
  }
  # The shell the script needs comes from the base image, not from the files.
  package {
    base  = seed.busybox
    files = { "/bin/echo-json" = step.build.output["/out/bin/echo-json"] }
  }`, 1)
	if main == mcpProjectFiles["main.hcl"] {
		t.Fatal("the fixture changed")
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	base := startServe(t, dir)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+"/capabilities/echo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(`{"text":"hi"}`); status != 200 || body != `{"text":"hi"}`+"\n" {
		t.Fatalf("serve: %d %s, want 200 {\"text\":\"hi\"}", status, body)
	}
	cs := connectMCP(t, testMCPConfig(t, dir), "")
	if res := callTool(t, cs, "cap_echo", map[string]any{"text": "hi"}); res.IsError || !strings.Contains(resultText(res), `"hi"`) {
		t.Fatalf("cap_echo: isError %v, %s", res.IsError, resultText(res))
	}

	// The image the admission binds, gone from this workspace: the call is refused, and
	// says which image it needs, rather than running the files alone (a 502 "contract
	// broken" on /bin/sh missing) or on another image.
	if err := os.RemoveAll(filepath.Join(dir, ".foundry", "images")); err != nil {
		t.Fatal(err)
	}
	base = startServe(t, dir)
	status, body := post(`{"text":"hi"}`)
	if status == 200 || !strings.Contains(body, "which this workspace does not hold") {
		t.Errorf("a call whose admitted image is gone: %d %s", status, body)
	}
}
