package redis_test

import (
	"testing"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// TestMain stops the shared redis-server processes after the tests.
func TestMain(m *testing.M) { redistest.Main(m) }
