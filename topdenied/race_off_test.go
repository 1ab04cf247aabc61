//go:build !race

package topdenied

const raceEnabled = false
