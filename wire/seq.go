package wire

// PSN is a 32-bit packet sequence number that wraps. Order between two PSNs
// is serial-number arithmetic (RFC 1982): a is before b when b-a, taken as a
// signed 32-bit distance, is positive. It is meaningful while the two are
// less than 2^31 apart, which the receive window (at most 2^16) guarantees.
type PSN uint32

// Before reports whether p comes before q.
func (p PSN) Before(q PSN) bool { return int32(q-p) > 0 }

// After reports whether p comes after q.
func (p PSN) After(q PSN) bool { return int32(p-q) > 0 }

// Distance returns q-p as a signed count of packets.
func (p PSN) Distance(q PSN) int32 { return int32(q - p) }

// Add returns p advanced by n.
func (p PSN) Add(n int) PSN { return p + PSN(uint32(n)) }
