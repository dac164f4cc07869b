package control_test

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
)

// childEnv carries "socket peer qpn token" to TestHelperKilledClient.
const childEnv = "METAROCE_TEST_KILLED_CLIENT"

// TestHelperKilledClient is not a test: run by TestEventsClientKilled as
// a child process, it connects a queue pair to the parent's and waits to
// be killed.
func TestHelperKilledClient(t *testing.T) {
	arg := os.Getenv(childEnv)
	if arg == "" {
		t.Skip("the child of TestEventsClientKilled")
	}
	f := strings.Fields(arg)
	c, err := client.Dial(f[0])
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	q, err := c.CreateQP(client.QPOptions{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	qpn, _ := strconv.ParseUint(f[2], 10, 32)
	token, _ := strconv.ParseUint(f[3], 10, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Connect(ctx, netip.MustParseAddr(f[1]), uint32(qpn), token); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("connected")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestEventsClientKilled: a client process killed with SIGKILL shows up
// as EventPeerClosed on the server's queue pair (the kernel closes its
// session, the daemon its connections), well within the keepalive time.
func TestEventsClientKilled(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	srv := apptest.Dial(t, ha.Sock)
	q, err := srv.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKilledClient$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d", childEnv, hb.Sock, ha.Addr, q.Num, q.Token))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := q.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "connected" {
		t.Fatalf("child: %q", line)
	}
	if e := waitEvent(t, q); e.Type != client.EventConnected {
		t.Fatalf("event %+v", e)
	}
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	start := time.Now()
	if e := waitEvent(t, q); e.Type != client.EventPeerClosed {
		t.Fatalf("event %+v after the client was killed, want peer closed", e)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("noticed %v after the kill", took)
	}
}
