package dataplane

import "github.com/metaroce/metaroce/transport"

// Iterate runs one loop iteration at now, for BenchmarkEngineLoop, which
// lives in the external test package (it drives the engines with
// internal/gentest's writer and target, which import this package) and
// steps two engines on one goroutine with a clock of its own.
func (e *Engine) Iterate(now transport.Time) bool {
	e.fakeClock = true
	return e.iterate(now)
}

// MaxFlush is how many packets one iteration hands to the link at most.
const MaxFlush = maxFlush
