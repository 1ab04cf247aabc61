package topdenied

import "time"

// Window is a span of time the top denied ids are counted over: the last
// five minutes or the last hour.
type Window int

const (
	// Window5m counts in buckets of a minute: the current one and the
	// five before it, so it covers between 5 and 6 minutes.
	Window5m Window = iota
	// Window1h counts in buckets of five minutes: the current one and the
	// twelve before it, so it covers between 60 and 65 minutes.
	Window1h
	numWindows
)

// windowSpec is how a window is counted.
type windowSpec struct {
	name    string
	span    time.Duration // what the window is said to cover
	width   time.Duration // one bucket
	buckets int           // buckets kept, the current one included
}

func (w Window) spec() windowSpec {
	if w == Window1h {
		return windowSpec{"1h", time.Hour, 5 * time.Minute, 13}
	}
	return windowSpec{"5m", 5 * time.Minute, time.Minute, 6}
}

// String is the window as the API names it: "5m" or "1h".
func (w Window) String() string { return w.spec().name }

// Seconds is the span the window stands for, in seconds.
func (w Window) Seconds() int { return int(w.spec().span / time.Second) }

// Windows lists every window.
func Windows() [numWindows]Window { return [...]Window{Window5m, Window1h} }

// ParseWindow reads a window's name, "5m" or "1h".
func ParseWindow(s string) (Window, bool) {
	for _, w := range Windows() {
		if s == w.String() {
			return w, true
		}
	}
	return 0, false
}

// retention is how long after its last denial a limit's counts matter to
// some window: the longest window's buckets.
func retention() time.Duration {
	s := Window1h.spec()
	return time.Duration(s.buckets) * s.width
}
