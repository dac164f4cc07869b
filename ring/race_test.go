//go:build race

package ring

// raceOn scales the longest tests down under the race detector.
const raceOn = true
