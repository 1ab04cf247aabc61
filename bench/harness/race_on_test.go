//go:build race

package main

// raceEnabled: the tests run under the race detector, so the limiter and
// bare they build are built with it too, from the packages the service's
// own race-detector tests already compiled.
const raceEnabled = true
