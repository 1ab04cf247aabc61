//go:build browser && race

package browser

// raceEnabled: the tests run under the race detector, so the limiter is
// built with it too, from the packages the service's own race-detector
// tests already compiled.
const raceEnabled = true
