package compliance

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/wire"
)

// The suite must catch a broken target, not only pass a good one. These
// tests run metaroced in process with a deliberate fault between its
// transport and its link (daemon.TestLinkFault; the faults exist only in
// this file) and expect the cases that check that behaviour, and only
// those, to fail.

// faultLink breaks one thing on its way through.
type faultLink struct {
	dataplane.Link
	rx func(p *dataplane.RxPacket)
	tx func(b []byte)
}

func (f *faultLink) Receive(batch []dataplane.RxPacket) int {
	n := f.Link.Receive(batch)
	if f.rx != nil {
		for i := range batch[:n] {
			f.rx(&batch[i])
		}
	}
	return n
}

func (f *faultLink) SubmitTx(batch []dataplane.TxPacket) error {
	if f.tx != nil {
		for i := range batch {
			if batch[i].Len > 0 {
				f.tx(batch[i].Buf[:batch[i].Len])
			}
		}
	}
	return f.Link.SubmitTx(batch)
}

// noSack: acks report only their PathAckSeq (SACK bit 0), as a receiver
// that forgot the bitmap would.
func noSack(b []byte) {
	if len(b) == wire.AckLen+wire.TrailerLen && b[1] == byte(wire.OpAck) {
		b[40] = 1
		clear(b[41:72])
		wire.Seal(b)
	}
}

// noCRC: every received packet is resealed before the transport sees it,
// which is what a receiver that never checks the CRC does.
func noCRC(p *dataplane.RxPacket) {
	if len(p.Payload) >= 12 {
		wire.Seal(p.Payload)
	}
}

func TestFaultsAreCaught(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the target daemon runs in a network namespace")
	}
	for _, tc := range []struct {
		name string
		link func(l dataplane.Link) dataplane.Link
		run  []string
		want []string // the cases that must fail, exactly
	}{
		{"acks-without-sack", func(l dataplane.Link) dataplane.Link { return &faultLink{Link: l, tx: noSack} },
			[]string{"5.2", "2.3", "8.1"},
			[]string{"ack-sack-gaps", "ack-sack-late-arrival", "enc-entropy-not-identity", "seq-spray-paths"}},
		{"no-crc-check", func(l dataplane.Link) dataplane.Link { return &faultLink{Link: l, rx: noCRC} },
			[]string{"3.4", "3.5"},
			[]string{"crc-conn-dropped", "crc-data-never-placed", "malformed-unknown-conn-silent", "ver-bad-crc-silent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runAgainstFaulty(t, tc.link, tc.run)
			var failed []string
			for _, f := range rep.Failures {
				failed = append(failed, f.Case)
				t.Logf("caught: §%s %s: %s", f.Clause, f.Case, f.Reason)
			}
			sort.Strings(failed)
			if strings.Join(failed, " ") != strings.Join(tc.want, " ") {
				t.Errorf("failed %v, want exactly %v", failed, tc.want)
			}
		})
	}
}

func runAgainstFaulty(t *testing.T, fault func(dataplane.Link) dataplane.Link, run []string) *Report {
	pair := testnet.NewPair(t, testnet.Config{})
	daemon.TestLinkFault = fault
	t.Cleanup(func() { daemon.TestLinkFault = nil })
	cfg := config.Defaults()
	ic := config.DefaultInterface(pair.B.Port.Name)
	ic.Backend = config.BackendUDP
	cfg.Interfaces = []config.Interface{ic}
	cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
	cfg.MetricsAddress = ""
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if err := pair.B.Go(func() {
		done <- daemon.Run(ctx, &cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{CPU: -1})
	}); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("daemon did not stop")
		}
	})
	mem, err := ExposeControl(cfg.ControlSocket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Target: pair.B.IPv4, Local: pair.A.IPv4, Listen: pair.A.ListenUDP,
		Memory: mem, Run: run, DSCPData: 26, DSCPControl: 48})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed == 0 {
		t.Fatalf("nothing passed: %+v", rep.Cases)
	}
	return rep
}
