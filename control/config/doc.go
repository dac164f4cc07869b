// Package config is the configuration of metaroced, the per-host MetaRoCE
// daemon: a YAML file, command-line overrides, and the validated Config the
// daemon builds its runtime objects from.
//
// # Layers
//
// A Config is built in three layers and checked once:
//
//	Defaults()         every default, with its reason (the transport's come
//	                   from transport.Defaults, an interface's from
//	                   DefaultInterface)
//	the YAML file      only the keys it sets; a key with no value (null)
//	                   keeps its default
//	the flags          only those given on the command line (see Flags)
//	Validate()         fills the remaining defaults, checks everything,
//	                   reports every problem at once
//
// so a flag can correct what the file got wrong, and nothing is validated
// twice or half. Validate on a validated Config changes nothing; the result
// is a plain value with no hidden state, safe to compare (Reloadable) and to
// hand to the packages that build sockets, engines and listeners.
//
// # The file
//
// deploy/metaroced.yaml lists every key at its default, with what it means;
// a test keeps it equal to Defaults. Decoding is strict: an unknown key, a
// key given twice, a value of the wrong type (a float for an integer, a
// duration without a unit), a second YAML document or trailing garbage is an
// error, reported as "file:line: message". Problems that are not about the
// YAML itself (an out-of-range port, a duplicate queue) are reported by
// Validate under the key's path, "interfaces[1].queues: duplicate queue 3",
// all of them, joined with errors.Join.
//
// The transport section maps onto transport.Config, whose own Validate
// fills its defaults (a tunable set to 0 takes the transport's default) and
// applies its rules; its complaints come back under the key they concern.
//
// # Reloading
//
// The daemon reloads on SIGHUP by loading the file again through the same
// Flags and calling Reloadable(running, loaded): the log level and format,
// the metrics address and the limits may change at run time; everything
// else needs a restart, and Reloadable says which keys those are.
package config
