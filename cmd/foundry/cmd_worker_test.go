package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemporalFlagsRefusedUpFront: apply -engine temporal with no Temporal address is a usage
// error before the project is planned, so nothing is written into it (not even the signing
// key a first apply generates).
func TestTemporalFlagsRefusedUpFront(t *testing.T) {
	t.Setenv("FOUNDRY_TEMPORAL_ADDRESS", "")
	dir := filepath.Join(t.TempDir(), "hello")
	copyTree(t, filepath.Join("..", "..", "examples", "hello"), dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "-auto-approve", "-engine", "temporal", dir}, "-engine temporal needs -temporal-address"},
		{[]string{"apply", "-engine", "temporal", "-temporal-address", "127.0.0.1:1", "-heartbeat-timeout", "10ms", dir}, "-heartbeat-timeout 10ms: want at least 1s"},
		{[]string{"apply", "-engine", "nomad", dir}, `unknown engine "nomad"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry")); !os.IsNotExist(err) {
		t.Fatalf("a refused apply wrote into the project: %v", err)
	}
}
