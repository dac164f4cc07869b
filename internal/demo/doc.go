// Package demo is `metaroce demo`: it builds hosts and switches of network
// namespaces (internal/testnet), starts metaroced daemons in them as
// processes of this binary (`metaroce daemon`), runs the applications'
// side as `metaroce perf` processes or in-process client flows, measures
// the baselines (raw AF_XDP, Linux TCP, a TCP ping-pong) on the same links
// in the same run, tears it all down and reports one JSON object whose
// `ok` is false, and whose Run returns an error, when any part failed.
//
// Topologies: star (two hosts through one lossy switch, demo.go) and
// leafspine (two leaves, N spines, a spine cut mid-transfer,
// demo_leafspine*.go; docs/demo.md).
//
// The package runs the binary it is in (os.Executable) for the daemons
// and perf processes, so its tests' TestMain stands in for those
// subcommands.
package demo
