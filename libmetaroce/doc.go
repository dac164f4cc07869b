// Package libmetaroce holds the C client library of metaroced (include/,
// src/: docs/api.md implemented without the Go runtime) and the Go tests
// that build its C test program with AddressSanitizer and run it against
// real daemons in network namespaces and against a hostile fake daemon.
// There is no Go code here to import; `make clib` builds the library.
package libmetaroce
