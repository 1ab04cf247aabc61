package vectors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The embedded copy must stay the same as the shared public vectors, which
// sit beside the repository in every checkout and CI run.
func TestCopyMatchesShared(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "vectors", "gcra-public.json")
	want, err := os.ReadFile(shared)
	if os.IsNotExist(err) {
		t.Skipf("%s is not beside this checkout", shared)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(PublicBytes(), want) {
		t.Fatalf("internal/vectors/testdata/gcra-public.json differs from %s: copy it again", shared)
	}
}

func TestPublicParses(t *testing.T) {
	f, err := Public()
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, sc := range f.Scenarios {
		steps += len(sc.Steps)
	}
	if len(f.Scenarios) < 5 || steps < 50 || len(f.Defaults) == 0 {
		t.Fatalf("only %d scenarios with %d steps: the file did not parse as expected", len(f.Scenarios), steps)
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct{ ns, unit, want int64 }{{0, 1e6, 0}, {1, 1e6, 1}, {1e6, 1e6, 1}, {1e6 + 1, 1e6, 2}, {333333333, 1, 333333333}} {
		if got := round(c.ns, time.Duration(c.unit)); got != c.want {
			t.Errorf("round(%d, %d) = %d, want %d", c.ns, c.unit, got, c.want)
		}
	}
}
