package containerd

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A keeper's owner is alive only while its process runs: not once it is a zombie (killed,
// not yet reaped by its parent), and not when its pid now belongs to another process.
func TestKeeperOwnerAlive(t *testing.T) {
	if !ownerAlive(keeperOwner()) {
		t.Fatal("this process does not count as alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, ok := procStart(pid)
	if !ok {
		t.Fatal("no start time for a running process")
	}
	label := bootID() + "/" + strconv.Itoa(pid) + "/" + start
	if !ownerAlive(label) {
		t.Error("a running owner counts as dead")
	}
	if ownerAlive(bootID() + "/" + strconv.Itoa(pid) + "/1") {
		t.Error("a process started at another time (a reused pid) counts as the owner")
	}
	if ownerAlive("another-boot/" + strconv.Itoa(pid) + "/" + start) {
		t.Error("an owner from another boot counts as alive")
	}
	cmd.Process.Kill()
	// Not waited for: a zombie until Wait.
	deadline := time.Now().Add(5 * time.Second)
	for ownerAlive(label) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ownerAlive(label) {
		t.Error("a zombie owner counts as alive")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Errorf("the owner was reaped before the check; the zombie case was not tested: %v", err)
	}
	cmd.Wait()
}
