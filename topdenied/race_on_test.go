//go:build race

package topdenied

// raceEnabled: the race detector slows the hot path some tenfold, so the
// longest tests count fewer ids under it.
const raceEnabled = true
