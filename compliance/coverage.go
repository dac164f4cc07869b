package compliance

import "slices"

// Cases is the whole suite, grouped by part of the spec.
var Cases = slices.Concat(commonCases, dataCases, ackCases, nackCases, connCases, planeCases, seqCases, recvCases, senderCases, vectorCases())

// ClauseTitles names the clauses of docs/spec.md that cases cite (the
// spec-and-suite test checks them against the headings).
var ClauseTitles = map[string]string{
	"1.3": "Byte order and bit numbering", "1.4": "Sequence-number arithmetic",
	"2.1": "Layers", "2.2": "UDP destination port", "2.3": "Path entropy: the UDP source port",
	"2.4": "DSCP and ECN", "2.5": "MTU and payload size",
	"3.1": "Version", "3.2": "Opcodes", "3.3": "Flags", "3.4": "Sizes and the CRC32C trailer",
	"3.5": "Receive processing order", "3.6": "Reserved fields and strictness",
	"4.1.1": "Validation", "4.1.2": "Placement", "4.2": "Timestamps", "4.3": "Immediate data", "4.4": "Probes",
	"5.1": "Layout", "5.2": "Receiver path state", "5.3": "Window and credit", "5.4": "CE count",
	"5.5": "When acks are sent", "5.7": "Sender processing of an ack",
	"6.1": "Layout", "6.2": "Reasons", "6.3": "Sender handling",
	"7.1": "Layout", "7.2": "Parameters", "7.3": "State machine and handshake", "7.4": "Cookie",
	"7.5": "Reject and reset reasons", "7.6": "Unknown and stale connection ids", "7.7": "Teardown",
	"7.8": "Stateless replies",
	"7.9": "Planes",
	"8.1": "PSNs and per-path sequence numbers", "8.2": "Receiver", "8.3.1": "Cumulative acknowledgement",
	"8.3.2": "Per-path scan", "8.4": "Retransmission timeout", "8.5": "Windows, paths and retransmission",
	"8.9.3": "The receiver's rate hint", "8.10": "Hole repair",
	"9.1": "Messages and streams", "9.2": "WRITE and WRITE_IMM", "9.3": "READ", "9.4": "SEND and receive buffers",
	"9.5":  "Failure and flushing",
	"10.1": "Keys and protection domains", "10.2": "Access rights", "10.3": "Checks",
	"12.1": "Format",
	"13":   "Security considerations (informative)",
}

// NotCoveredEntry is a normative clause the suite does not test, and why.
// A Clause ending in ".*" covers every subclause.
type NotCoveredEntry struct {
	Clause, Reason string
}

// NotCovered lists the normative clauses without a case.
var NotCovered = []NotCoveredEntry{
	{"1.1", "scope: states what the document covers; nothing to observe"},
	{"1.2", "requirements language: defines MUST/SHOULD/MAY"},
	{"1.5", "terms: definitions only"},
	{"8.3.3", "the loss timer fires on the target's own schedule for holes its path choice creates; from the wire it is indistinguishable from §8.4 without controlling which path the target sends on"},
	{"8.6", "a statistical bound over many messages under random loss; transport/lossy_test.go checks it for the reference implementation"},
	{"12.2", "how the vectors are generated: a property of the repository"},
	{"12.4", "the cookie construction is the issuer's own (§7.4 allows any); its properties are covered under §7.4"},
}
