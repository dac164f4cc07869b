package testnet

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Why the leaves clear the packet's hash: Linux's multipath hash, with the
// L4 policy, takes an L4 hash already attached to the skb when there is one
// (skb->l4_hash) instead of hashing the headers. A TCP socket (and an IPv6
// UDP socket, for its flow label) attaches its own random hash to what it
// sends, and a veth hands the skb to the leaf's namespace with that hash
// still on it. So without this, a TCP flow's spine is picked by a random
// per-socket value, its data and acks independently, where a real switch
// hashes the headers (and Linux's header hash is symmetric: data and acks
// share a spine). A tc ingress program on each leaf's host ports calls
// bpf_set_hash_invalid, so the leaf hashes headers for every packet and
// ip route get (SpineOf) predicts every flow's spine.

// hashClearProgram is the tc program: bpf_set_hash_invalid(skb), then
// TC_ACT_OK. R1 holds the skb at entry and is the helper's argument.
func hashClearProgram() (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "mrtn_hash_clr",
		Type:    ebpf.SchedCLS,
		License: "GPL", // bpf_set_hash_invalid is a GPL-only helper
		Instructions: asm.Instructions{
			asm.FnSetHashInvalid.Call(),
			asm.Mov.Imm(asm.R0, 0), // TC_ACT_OK
			asm.Return(),
		},
	})
}

// clearHashes attaches the program to the ingress of every host port of
// every leaf (tcx, bpf_link: it detaches when the link is closed or this
// process exits). It returns what to close.
func (f *LeafSpine) clearHashes() (io.Closer, error) {
	prog, err := hashClearProgram()
	if err != nil {
		return nil, fmt.Errorf("testnet: load the hash-clearing tc program: %w", err)
	}
	cl := &closers{prog}
	for _, leaf := range f.Leaves {
		for _, h := range leaf.Hosts {
			port := h.Port.Peer // the leaf's end
			// Interface indexes are per namespace, and so is the
			// device a tcx link names: attach from inside.
			err := leaf.Do(func() error {
				idx, err := ifindexHere(port.Name)
				if err != nil {
					return err
				}
				l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: ebpf.AttachTCXIngress})
				if err != nil {
					return err
				}
				*cl = append(*cl, l)
				return nil
			})
			if err != nil {
				return nil, errors.Join(fmt.Errorf("testnet: attach the hash-clearing program to %s: %w", port, err), cl.Close())
			}
		}
	}
	return cl, nil
}

// closers closes several things, last first.
type closers []io.Closer

func (c *closers) Close() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i].Close())
	}
	*c = nil
	return errors.Join(errs...)
}

// ifindexHere is the index of the named interface in the calling thread's
// namespace.
func ifindexHere(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// Close detaches the leaves' tc programs and tears the fabric down.
func (f *LeafSpine) Close() error {
	var err error
	if f.hashes != nil {
		err = f.hashes.Close()
	}
	return errors.Join(err, f.Net.Close())
}
