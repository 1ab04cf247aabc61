//go:build browser && !race

package browser

const raceEnabled = false
