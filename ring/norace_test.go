//go:build !race

package ring

const raceOn = false
