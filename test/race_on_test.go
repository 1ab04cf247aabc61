//go:build race

package test

// raceEnabled: the tests run under the race detector, so the binary is
// built with it too.
const raceEnabled = true
