package redis

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits"
)

// boxCursor is where a box listing goes on: the unit being scanned (a
// master's address in key format v1, "" for one Redis; a group's number
// in format v2), the SCAN or HSCAN cursor in it, and, when a page ended
// inside one step of that cursor, the last name the page took from it and
// the cursor the step ended at. A step's names are taken in sorted order,
// so that the next page, which runs the same step again, takes the names
// after that one, then goes on from the earlier of the two runs' ends
// (earlierCursor says why).
type boxCursor struct {
	Unit  string `json:"u,omitempty"`
	Scan  uint64 `json:"c,omitempty"`
	After string `json:"a,omitempty"`
	End   uint64 `json:"e,omitempty"`
}

// boxCursorPrefix starts every cursor of this source; the rest is the
// cursor as base64url JSON, opaque to clients.
const boxCursorPrefix = "r1."

// encode writes the JSON without HTML's escapes: json.Marshal writes each
// <, > and & of a name as six bytes, and a name with a string id of them
// made a cursor past the length the API takes back (1,024 bytes), so that
// the listing could not go on.
func (c boxCursor) encode() string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(c) // four plain fields: always encodes
	return boxCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(strings.TrimSuffix(b.String(), "\n")))
}

func decodeBoxCursor(s string) (boxCursor, error) {
	var c boxCursor
	if s == "" {
		return c, nil
	}
	rest, ok := strings.CutPrefix(s, boxCursorPrefix)
	if !ok {
		return c, ratelimits.ErrInvalidCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return c, ratelimits.ErrInvalidCursor
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil || d.More() {
		return c, ratelimits.ErrInvalidCursor
	}
	return c, nil
}

// globEscape escapes what Redis's MATCH patterns read as special, so that
// a namespace or an enum matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
