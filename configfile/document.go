package configfile

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yamlLine matches the position yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument parses a file into its root node, walked by hand so that
// problems can name lines, with its aliases and merge keys expanded
// (expand). root is nil for a file without a document (empty or comments
// only); ok is false after a syntax error, reported as a problem.
func (l *loader) parseDocument(file string, data []byte) (root *yaml.Node, ok bool) {
	if at := invalidUTF8(data); at >= 0 {
		// yaml.v3 says so without a line.
		l.add(file, 1+bytes.Count(data[:at], []byte("\n")), "", "not valid UTF-8 (the byte 0x%02x): save the file as UTF-8", data[at])
		return nil, false
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return nil, true
	} else if err != nil {
		l.syntaxProblem(file, data, err)
		return nil, false
	}
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		if err != nil {
			l.syntaxProblem(file, data, err)
		} else {
			l.add(file, next.Line, "", "the file has more than one YAML document (a second \"---\"); put everything in one")
		}
		return nil, false
	}
	return l.expand(file, doc.Content[0])
}

// invalidUTF8 is the offset of data's first byte that is not UTF-8, or -1;
// a file that starts with a UTF-16 byte-order mark, which yaml.v3 reads,
// is not UTF-8 and is left to it.
func invalidUTF8(data []byte) int {
	if bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return -1
	}
	for at := 0; at < len(data); {
		r, n := utf8.DecodeRune(data[at:])
		if r == utf8.RuneError && n == 1 {
			return at
		}
		at += n
	}
	return -1
}

func (l *loader) syntaxProblem(file string, data []byte, err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		if strings.HasPrefix(m[2], "did not find expected ") {
			line = parserErrorLine(data, line, m[2])
		}
		l.add(file, line, "", "YAML syntax error: %s", m[2])
		return
	}
	l.add(file, 0, "", "YAML syntax error: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}

// parserErrorLine finds the line of a parser error ("did not find
// expected key", "... node content"), which yaml.v3 words at the line
// before the block it was parsing, however far below the token it could
// not take is: the first line k such that the file's first k lines fail
// with the same problem. The block comes before the token, so the search
// starts at it; it assumes that once the lines up to the token are in,
// every longer part fails so too, and keeps reported when nothing fits.
func parserErrorLine(data []byte, reported int, problem string) int {
	ends := lineEnds(data)
	failsBy := func(k int) bool {
		m := yamlLine.FindStringSubmatch(fmt.Sprint(decodeAll(data[:ends[k-1]])))
		return m != nil && m[2] == problem
	}
	lo := max(reported, 1)
	if lo > len(ends) || !failsBy(len(ends)) {
		return reported
	}
	// The least k in [lo, len(ends)] that failsBy.
	k := lo + sort.Search(len(ends)-lo+1, func(i int) bool { return failsBy(lo + i) })
	return min(k, len(ends))
}

// lineEnds returns the offset just past each line of data (its newline
// included), the last line's end being len(data).
func lineEnds(data []byte) []int {
	var ends []int
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// decodeAll decodes every YAML document of data, for its first error.
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}
