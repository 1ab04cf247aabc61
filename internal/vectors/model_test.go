package vectors

import (
	"testing"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// TestModelSourceERL runs the suite's rate-counter and penalty-box tests on
// the model source: their expected decisions check the bucket package's
// rules themselves, since the model compares only with itself.
func TestModelSourceERL(t *testing.T) {
	sourcetest.RunERL(t, func(*testing.T) ratelimits.Source { return NewModelSource() })
}
