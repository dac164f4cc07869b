// Package wire encodes and decodes MetaRoCE v1 transport packets: the bytes
// that follow the UDP header (docs/spec.md §3 to §7).
//
// Every packet starts with the same 8-byte prefix (version, opcode, flags,
// destination connection id) and ends with a CRC32C trailer over everything
// before it. Between them sits one fixed-size header per packet class: Data
// (RDMA WRITE, SEND, READ request and response, followed by payload), Ack,
// Nack and Conn (connection set-up and teardown). Fixed sizes keep parsing to
// a length check and a table lookup, and let a sender write a header straight
// into a UMEM frame in front of the payload it copies there.
//
// Decoding is done through typed views (Data, Ack, Nack, Conn are []byte with
// accessors) that Parse returns only after checking, once, everything an
// accessor relies on: length, version, opcode, reserved bits, field
// consistency and the CRC. Accessors therefore never fail and never allocate.
// Encoding goes through plain structs (DataHeader, AckHeader, ...) whose
// Put method writes the fixed header; Seal writes the CRC trailer once the
// payload is in place.
//
// Errors are values of type Error, so a receiver on the hot path can count
// drops by reason (Error.Reason) without allocating or formatting.
//
// This package is written by hand because the format is ours: no generic
// serialisation library produces fixed-offset, allocation-free views.
package wire
