package test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file reads what a running limiter exports at /metrics, for the
// tests that hold the shipped alerting rules and dashboard to it
// (alerts_test.go).

// expSample is one sample line of the Prometheus text format.
type expSample struct {
	name   string
	labels map[string]string
	value  float64
}

// labelNames are the sample's label names, sorted.
func (s expSample) labelNames() []string {
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// exposition is what one or more scrapes showed: every sample, and the
// type of every family a TYPE line named.
type exposition struct {
	samples []expSample
	types   map[string]string
}

// parseExposition reads the Prometheus text format (version 0.0.4).
func parseExposition(body string) (*exposition, error) {
	e := &exposition{types: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				return nil, fmt.Errorf("line %d: %q: a TYPE line wants a name and a type", n, line)
			}
			e.types[f[2]] = f[3]
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		s, err := parseSampleLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %q: %v", n, line, err)
		}
		e.samples = append(e.samples, s)
	}
	return e, sc.Err()
}

var metricNameRe = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
var labelNameRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*`)

// parseSampleLine reads `name{label="value",...} value [timestamp]`.
func parseSampleLine(line string) (expSample, error) {
	s := expSample{labels: map[string]string{}}
	s.name = metricNameRe.FindString(line)
	if s.name == "" {
		return s, fmt.Errorf("no metric name")
	}
	rest := line[len(s.name):]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			name := labelNameRe.FindString(rest)
			if name == "" || !strings.HasPrefix(rest[len(name):], `="`) {
				return s, fmt.Errorf("bad label at %q", rest)
			}
			rest = rest[len(name)+2:]
			var value strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						value.WriteByte('\n')
					default:
						value.WriteByte(rest[i]) // \\ and \"
					}
					continue
				}
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				value.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("label %s: unterminated value", name)
			}
			if _, dup := s.labels[name]; dup {
				return s, fmt.Errorf("label %s twice", name)
			}
			s.labels[name] = value.String()
			rest = strings.TrimLeft(rest, " ")
			rest = strings.TrimPrefix(rest, ",")
		}
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp after the labels")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// add puts the samples and types of o into e.
func (e *exposition) add(o *exposition) {
	e.samples = append(e.samples, o.samples...)
	for k, v := range o.types {
		e.types[k] = v
	}
}

// names is every sample name (a histogram's _bucket, _sum and _count
// included) and every family name a TYPE line gave.
func (e *exposition) names() map[string]bool {
	m := map[string]bool{}
	for _, s := range e.samples {
		m[s.name] = true
	}
	for f := range e.types {
		m[f] = true
	}
	return m
}

// find is the samples named name whose labels include match.
func (e *exposition) find(name string, match map[string]string) []expSample {
	var out []expSample
	for _, s := range e.samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// value is the sum of the samples named name whose labels include match,
// and whether there was one.
func (e *exposition) value(name string, match map[string]string) (float64, bool) {
	found := e.find(name, match)
	var sum float64
	for _, s := range found {
		sum += s.value
	}
	return sum, len(found) > 0
}

// checkLabelSets fails t for a sample name whose samples do not all have
// the same label names: a rule or a query written for one would miss the
// others.
func (e *exposition) checkLabelSets(t *testing.T) {
	t.Helper()
	seen := map[string]string{}
	for _, s := range e.samples {
		names := strings.Join(s.labelNames(), ",")
		if prev, ok := seen[s.name]; ok && prev != names {
			t.Errorf("%s has samples with labels {%s} and {%s}", s.name, prev, names)
		}
		seen[s.name] = names
	}
}

// scrapeMetrics reads url's /metrics and parses it.
func scrapeMetrics(t *testing.T, url string) *exposition {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d", url, resp.StatusCode)
	}
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	e, err := parseExposition(b.String())
	if err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	return e
}

// closedPort is a loopback address nothing listens on (it did a moment
// ago): a Redis there refuses every connection at once.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
