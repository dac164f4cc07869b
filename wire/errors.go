package wire

// Error is a parse failure. Its values are comparable constants, so a hot
// path can switch on them or index a counter array with Reason without
// allocating.
type Error uint8

const (
	errNone Error = iota
	// ErrShort: the packet is shorter than its fixed header and trailer.
	ErrShort
	// ErrVersion: the version is not 1 (§3.5: answered with NACK
	// UNSUPPORTED_VERSION when the connection id is known).
	ErrVersion
	// ErrOpcode: the opcode is not defined.
	ErrOpcode
	// ErrCRC: the CRC32C trailer does not match.
	ErrCRC
	// ErrReserved: a reserved field or undefined flag is not zero.
	ErrReserved
	// ErrLength: a length field disagrees with the packet or the message.
	ErrLength
	// ErrField: a field holds a value its opcode forbids.
	ErrField
	numErrors
)

// NumReasons is the size of an array indexed by Error.Reason.
const NumReasons = int(numErrors)

var errText = [...]string{
	errNone:     "no error",
	ErrShort:    "packet too short",
	ErrVersion:  "unsupported version",
	ErrOpcode:   "unknown opcode",
	ErrCRC:      "crc32c mismatch",
	ErrReserved: "reserved field not zero",
	ErrLength:   "inconsistent length",
	ErrField:    "field not allowed for opcode",
}

func (e Error) Error() string {
	if int(e) < len(errText) {
		return "metaroce wire: " + errText[e]
	}
	return "metaroce wire: unknown error"
}

// Reason returns a small integer for counter arrays.
func (e Error) Reason() int { return int(e) }

// ReasonName returns the short name used in metrics labels.
func ReasonName(r int) string {
	names := [...]string{"none", "short", "version", "opcode", "crc", "reserved", "length", "field"}
	if r >= 0 && r < len(names) {
		return names[r]
	}
	return "unknown"
}
