package executors

import (
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A dial must leave its thread alive and back in the host's namespace. Children started
// with Pdeathsig (runc) are killed when the thread that forked them exits, and Go ends a
// thread whose goroutine exits still locked to it: a dialer that kept its thread locked
// killed `runc run` at random.
func TestDialInKeepsThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setns needs root")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()

	type started struct {
		cmd *exec.Cmd
		err error
	}
	// Several goroutines, so that some run on threads other than the main one (which Go
	// never ends).
	ch := make(chan started, 8)
	for i := 0; i < cap(ch); i++ {
		go func() {
			runtime.LockOSThread()
			cmd := exec.Command("sleep", "30")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				ch <- started{err: err}
				return
			}
			c, err := dialIn(context.Background(), int(ns.Fd()), "tcp", ln.Addr().String())
			if err == nil {
				c.Close()
			}
			runtime.UnlockOSThread() // balances the Lock above; dialIn must balance its own
			ch <- started{cmd, err}
		}()
	}
	var cmds []*exec.Cmd
	for i := 0; i < cap(ch); i++ {
		s := <-ch
		if s.err != nil {
			t.Fatal(s.err)
		}
		cmds = append(cmds, s.cmd)
		defer s.cmd.Process.Kill()
	}
	time.Sleep(300 * time.Millisecond)
	for _, cmd := range cmds {
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 {
			t.Fatalf("a child forked on a dialing thread was killed: %v", ws.Signal())
		}
	}
}
