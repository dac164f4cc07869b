//go:build race

package demo

func init() { fabtestsUnderRace = true }
