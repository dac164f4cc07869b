//go:build race

package demo

// underRace: this test binary runs under the race detector.
const underRace = true
