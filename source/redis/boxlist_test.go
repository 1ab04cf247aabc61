package redis

import (
	"context"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// stretchScanner is a keyspace of one unit whose names lie at positions
// on the walk, for testing listBox's paging alone: a cursor is the
// position a step starts at (0: the start), and a step returns the names
// of the next count positions taken, as SCAN with COUNT does when each
// bucket holds one key. What the test changes between pages changes where
// the next run of a step ends.
type stretchScanner struct {
	at    map[string]uint64 // name → position (≥ 1)
	count int
}

func (f *stretchScanner) first(context.Context) (string, bool, error) { return "", true, nil }
func (f *stretchScanner) after(context.Context, string) (string, bool, error) {
	return "", false, nil
}
func (f *stretchScanner) resume(context.Context, string) (string, bool, bool, error) {
	return "", true, true, nil
}
func (f *stretchScanner) maxSteps() int                    { return 8 }
func (f *stretchScanner) entry(name string) (string, bool) { return name, true }
func (f *stretchScanner) position(_ context.Context, _ string, c uint64) ([2]uint64, error) {
	return [2]uint64{0, c}, nil
}

func (f *stretchScanner) step(_ context.Context, _ string, cursor uint64) (boxStep, error) {
	var ahead []uint64
	byPos := map[uint64]string{}
	for name, p := range f.at {
		if p >= cursor {
			ahead = append(ahead, p)
			byPos[p] = name
		}
	}
	slices.Sort(ahead)
	var st boxStep
	for i, p := range ahead {
		if i == f.count {
			st.next = p
			break
		}
		st.items = append(st.items, boxItem{name: byPos[p], value: "100"})
	}
	st.items = sortItems(st.items)
	return st, nil
}

// TestListBoxGoesOnFromTheEarlierEnd runs a step again after a page that
// ended inside it, with the keyspace changed so that the second run ends
// past the first (a name deleted inside it) or short of it (names added):
// every name present throughout is still listed.
func TestListBoxGoesOnFromTheEarlierEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(at map[string]uint64)
	}{
		// The first step holds d, c, b, a (positions 1 to 4); a page of two
		// takes a and b. Deleting d makes the second run reach position 5,
		// whose "ab" sorts before b: only the next steps can list it.
		{"longer", func(at map[string]uint64) { delete(at, "d") }},
		// Names added at the step's start make the second run end at
		// position 2, short of c and d.
		{"shorter", func(at map[string]uint64) {
			at["0x"], at["0y"], at["0z"] = 0, 0, 0
		}},
		{"unchanged", func(map[string]uint64) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := map[string]uint64{"d": 1, "c": 2, "b": 3, "a": 4, "ab": 5, "e": 6, "f": 7}
			sc := &stretchScanner{at: at, count: 4}
			ctx := context.Background()
			seen := map[string]bool{}
			cur, fresh := boxCursor{}, true
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("the listing does not end")
				}
				page, err := listBox(ctx, sc, cur, fresh, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Entries {
					seen[e.ID] = true
				}
				if page.Next == "" {
					break
				}
				if pages == 0 {
					tc.between(at)
				}
				if cur, err = decodeBoxCursor(page.Next); err != nil {
					t.Fatal(err)
				}
				fresh = false
			}
			for _, name := range []string{"a", "b", "c", "ab", "e", "f"} {
				if !seen[name] {
					t.Errorf("%q was there throughout and never listed (listed: %v)", name, seen)
				}
			}
		})
	}
}

// TestScanPositionIsTheWalksOrder walks tables of several sizes the way
// Redis increments a cursor (set the bits above the table's mask,
// reverse, add one, reverse back) and checks what earlierCursor relies
// on: positions only grow along a walk; when the table doubles, a cursor
// keeps its position and the bucket that splits off its own comes right
// after it; and with a dictionary per slot, every position in a slot
// comes before any in the next slot.
func TestScanPositionIsTheWalksOrder(t *testing.T) {
	next := func(v, mask uint64) uint64 {
		v |= ^mask
		v = bits.Reverse64(v)
		v++
		return bits.Reverse64(v)
	}
	for _, dictBits := range []uint{0, 14} {
		slot := uint64(0) // one dictionary: no slot bits
		if dictBits > 0 {
			slot = 5
		}
		at := func(v uint64) [2]uint64 { return scanPosition(v<<dictBits|slot, dictBits) }
		for size := uint64(1); size <= 1<<10; size <<= 1 {
			mask := size - 1
			var walk []uint64
			for v := uint64(0); ; {
				walk = append(walk, v)
				if v = next(v, mask); v == 0 {
					break
				}
			}
			if uint64(len(walk)) != size {
				t.Fatalf("a walk of a table of %d visits %d buckets", size, len(walk))
			}
			for i, v := range walk {
				if i > 0 && !before(at(walk[i-1]), at(v)) {
					t.Fatalf("table %d, dictBits %d: %#x then %#x at positions %v then %v", size, dictBits, walk[i-1], v, at(walk[i-1]), at(v))
				}
				if split := v | size; next(v, 2*size-1) != split || !before(at(v), at(split)) {
					t.Fatalf("table %d doubled: after %#x comes %#x, want %#x, after it", size, v, next(v, 2*size-1), split)
				}
				if p := at(v); p[0] != slot {
					t.Fatalf("cursor %#x of slot %d is in slot %d", v, slot, p[0])
				}
				if dictBits > 0 && !before(at(v), scanPosition(slot+1, dictBits)) {
					t.Fatalf("cursor %#x of slot %d is not before slot %d's start", v, slot, slot+1)
				}
			}
		}
	}
}

// TestSlotDicts reads INFO server's fields as the servers write them.
func TestSlotDicts(t *testing.T) {
	for _, tc := range []struct {
		info string
		want bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n", false},
		{"# Server\r\nredis_version:7.2.4\r\n", false},
		{"# Server\r\nredis_version:7.4.0\r\n", true},
		{"# Server\r\nredis_version:8.2.1\r\n", true},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:7.2.5\r\n", false},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", true},
		{"# Server\r\nredis_version:x\r\n", false},
		{"", false},
	} {
		if got := slotDicts(tc.info); got != tc.want {
			t.Errorf("slotDicts(%q) = %v, want %v", tc.info, got, tc.want)
		}
	}
}

// A page that ends inside a scan step names the last key it took in its
// cursor. With a string id of 256 bytes, of the characters JSON may escape,
// the cursor stays within the 1,024 bytes the API takes back, and reads
// back as it was.
func TestBoxCursorOfALongIDFits(t *testing.T) {
	for _, c := range []string{"<", ">", "&", "\"", "\\"} {
		cur := boxCursor{Unit: "10.0.0.1:6379", Scan: 1<<64 - 1, End: 1<<64 - 1,
			After: "lim:v1:{" + strings.Repeat(c, 256) + "}4294967295!"}
		s := cur.encode()
		if len(s) > 1000 {
			t.Errorf("an id of %q: a cursor of %d bytes", c, len(s))
		}
		if got, err := decodeBoxCursor(s); err != nil || got != cur {
			t.Errorf("an id of %q: read back as %+v, %v", c, got, err)
		}
	}
}
