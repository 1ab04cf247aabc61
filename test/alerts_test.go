package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"
)

// The shipped alerting rules (deploy/prometheus/alerts.yaml) and Grafana
// dashboard (deploy/grafana/limiter.json) against the metrics a running
// limiter exports: every metric they name must be in its /metrics, and
// promtool runs the rules on series named and labelled exactly as the
// scrape shows them.

const (
	alertsFile    = "deploy/prometheus/alerts.yaml"
	dashboardFile = "deploy/grafana/limiter.json"
)

// prometheusMade are the series Prometheus makes for every target itself,
// which no /metrics shows.
var prometheusMade = map[string]bool{"up": true}

// The labels Prometheus adds to every series it scrapes, as the rules
// see them.
const testJob, testInstance = "limiter", "limiter-1:8080"

func TestAlertsAndDashboard(t *testing.T) {
	t.Parallel() // its own limiters
	promtool := lookPromtool(t)
	exp := scrapeAfterEvents(t)
	t.Run("Rules", func(t *testing.T) { checkAlertRules(t, promtool, exp) })
	t.Run("Dashboard", func(t *testing.T) { checkDashboard(t, promtool, exp) })
}

// lookPromtool finds promtool, which Debian's prometheus package installs
// in /usr/bin.
func lookPromtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/promtool"); err == nil {
		return "/usr/bin/promtool"
	}
	t.Fatal("promtool is not installed (looked in PATH and /usr/bin): install it, e.g. apt-get install -y prometheus (scripts/test.sh does, as root)")
	return ""
}

// alertsDefaults are the limits of the processes scraped: a GCRA limit of
// one token, a shadow limit, and a window limit counted in process memory
// and synced every hour (so that only POST /v1/admin/sync syncs).
const alertsDefaults = `
AlertsGCRA:
  enum: 340
  id: string
  burst: 1
  count: 1
  period: 1h
AlertsShadow:
  enum: 341
  id: string
  burst: 1
  count: 1
  period: 1h
  shadow: true
AlertsSynced:
  enum: 342
  id: string
  algorithm: sliding-window
  count: 10
  period: 1h
  sync_rate: 3600
`

const alertsDescriptors = `
- domain: alerts
  descriptors:
    - keys: [key]
      limit: AlertsGCRA
`

// scrapeAfterEvents starts two limiters, makes happen cheaply what the
// rules watch for, checks that the counters moved, and returns both
// scrapes together:
//   - on the memory source with Envoy's service: decisions allowed,
//     denied and shadow_denied, an eviction of a bucket that was not full
//     (--max-buckets 1), an idempotent replay, a failed reload, gRPC
//     calls answered OK and InvalidArgument;
//   - on a Redis that refuses connections, with --fail-open: a degraded
//     answer, a refund answered 503, a failed ping, a failed sync.
func scrapeAfterEvents(t *testing.T) *exposition {
	t.Helper()
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", alertsDefaults)
	overrides := writeFile(t, dir, "overrides.yaml", "[]\n")
	env := map[string]string{
		"LIMITER_DEFAULTS":        defaults,
		"LIMITER_OVERRIDES":       overrides,
		"LIMITER_DESCRIPTORS":     writeFile(t, dir, "descriptors.yaml", alertsDescriptors),
		"LIMITER_RELOAD_INTERVAL": "0",
	}
	mem := startEnvoy(t, procOptions{Env: env, Args: []string{"--max-buckets", "1"}})
	redisEnv := map[string]string{"LIMITER_SOURCE": "redis://" + closedPort(t)}
	for k, v := range env {
		redisEnv[k] = v
	}
	down := startLimiter(t, procOptions{Env: redisEnv, Args: []string{"--fail-open", "--shutdown-timeout", "250ms"}})

	want := func(p *limiterProc, what string, r response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d\n%s", what, r.Status, r.Body, status, p.logs())
		}
	}
	spend := func(limit, id string) string { return fmt.Sprintf(`{"limit":%q,"id":%q}`, limit, id) }
	want(mem.limiterProc, "spend", mem.post("/v1/spend", spend("AlertsGCRA", "a")), 200)
	want(mem.limiterProc, "spend again (denied)", mem.post("/v1/spend", spend("AlertsGCRA", "a")), 200)
	want(mem.limiterProc, "shadow spend (evicts a)", mem.post("/v1/spend", spend("AlertsShadow", "s")), 200)
	want(mem.limiterProc, "shadow spend again", mem.post("/v1/spend", spend("AlertsShadow", "s")), 200)
	for range 2 {
		req := mustRequestBody(t, "POST", mem.URL+"/v1/spend", spend("AlertsGCRA", "i"))
		req.Header.Set("Idempotency-Key", "alerts-test-1")
		want(mem.limiterProc, "idempotent spend", mem.send(req), 200)
	}
	if _, err := mem.should("", rlRequest("alerts", desc("key", "g"))); err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if _, err := mem.should("", rlRequest("alerts")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ShouldRateLimit without descriptors: %v, want InvalidArgument", err)
	}
	replaceFile(t, overrides, "- NoSuchLimitAnywhere:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: x\n")
	want(mem.limiterProc, "reload of a broken file", mem.post("/v1/admin/reload", ""), 422)

	want(down, "spend on a dead source (fail-open)", down.post("/v1/spend", spend("AlertsGCRA", "a")), 200)
	want(down, "refund on a dead source", down.post("/v1/refund", spend("AlertsGCRA", "a")), 503)
	want(down, "spend of a synced limit", down.post("/v1/spend", spend("AlertsSynced", "w")), 200)
	want(down, "sync to a dead source", down.post("/v1/admin/sync", ""), 503)
	want(down, "readyz on a dead source", down.do("GET", "/readyz", ""), 503)

	m, d := scrapeMetrics(t, mem.URL), scrapeMetrics(t, down.URL)
	for _, c := range []struct {
		e     *exposition
		name  string
		match map[string]string
	}{
		{m, "limiter_decisions_total", map[string]string{"limit": "AlertsGCRA", "outcome": "allowed"}},
		{m, "limiter_decisions_total", map[string]string{"limit": "AlertsGCRA", "outcome": "denied"}},
		{m, "limiter_decisions_total", map[string]string{"limit": "AlertsShadow", "outcome": "shadow_denied"}},
		{m, "limiter_shadow_denials_total", map[string]string{"limit": "AlertsShadow"}},
		{m, "limiter_memory_evictions_not_full_total", nil},
		{m, "limiter_idempotent_replays_total", map[string]string{"op": "spend"}},
		{m, "limiter_config_reload_failures_total", nil},
		{m, "limiter_grpc_request_duration_seconds_count", map[string]string{"code": "OK"}},
		{m, "limiter_grpc_request_duration_seconds_count", map[string]string{"code": "InvalidArgument"}},
		{d, "limiter_degraded_answers_total", nil},
		{d, "limiter_decisions_total", map[string]string{"limit": "AlertsGCRA", "outcome": "degraded"}},
		{d, "limiter_source_errors_total", nil},
		{d, "limiter_source_operation_errors_total", map[string]string{"op": "spend"}},
		{d, "limiter_source_operation_errors_total", map[string]string{"op": "ping"}},
		{d, "limiter_sync_failures_total", map[string]string{"trigger": "admin"}},
		{d, "limiter_http_request_duration_seconds_count", map[string]string{"route": "/v1/refund", "status": "503"}},
	} {
		if v, _ := c.e.value(c.name, c.match); v <= 0 {
			t.Errorf("%s%v is %v after the events that count in it", c.name, c.match, v)
		}
	}
	exp := &exposition{types: map[string]string{}}
	exp.add(m)
	exp.add(d)
	exp.checkLabelSets(t)
	return exp
}

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, alertsFile))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return rules
}

// PromQL's words that are neither functions nor metrics.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "offset": true, "inf": true, "nan": true,
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlOffset   = regexp.MustCompile(`\boffset\s+-?[0-9a-zA-Z$_]+`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames are the metric names a PromQL expression reads: its
// identifiers that are not functions, keywords, label names in grouping
// clauses or matchers, durations or numbers.
func metricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	s = promqlOffset.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		if loc[0] > 0 && strings.ContainsRune("0123456789.", rune(s[loc[0]-1])) {
			continue // the exponent of a number, 1e3
		}
		word := s[loc[0]:loc[1]]
		if promqlKeywords[strings.ToLower(word)] {
			continue
		}
		if strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\n"), "(") {
			continue // a function or an aggregation
		}
		names = append(names, word)
	}
	return names
}

// checkExprNames fails t for each metric expr reads that the scrape did
// not show, and when it reads none.
func checkExprNames(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, n := range names {
		if !exported[n] && !prometheusMade[n] {
			t.Errorf("%s: %s is not a metric the service exports (expr %q)", where, n, expr)
		}
	}
}

// seriesSpec is one input series of a promtool test, made from a sample
// of the scrape: the first sample named name whose labels include match,
// with the label values of set put in (each must be a label the sample
// has), and Prometheus's job and instance added. With buckets, name is a
// histogram's _bucket series and the spec stands for one series per le
// the scrape shows for that label set, each with the values buckets gives
// for its bound.
type seriesSpec struct {
	name        string
	match, set  map[string]string
	fire, quiet string
	buckets     func(le float64) (fire, quiet string)
}

// alertCase is what fires one alert: its series with their fire values,
// and, with their quiet values, what must not fire it. labels are the
// alert's labels that come from its first series (besides the rule's own).
type alertCase struct {
	alert  string
	labels []string
	series []seriesSpec
}

const (
	shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	// Every input series has samples from 0 to 40 minutes, one a minute,
	// and the alerts are evaluated at the end.
	evalTime = "40m"
)

// counter gives a counter that rises by one a minute, or stays put.
func counter(name string, match map[string]string) seriesSpec {
	return seriesSpec{name: name, match: match, fire: "0+1x40", quiet: "3x40"}
}

var alertCases = []alertCase{
	{alert: "LimiterDown", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "up", fire: "0x40", quiet: "1x40"},
	}},
	{alert: "LimiterRestarting", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "process_start_time_seconds", fire: "1000+300x40", quiet: "1000x40"},
		{name: "limiter_config_last_success_timestamp_seconds", fire: "1000x40", quiet: "1000x40"},
	}},
	// A critical alert does not page for one error: quiet is a single one,
	// three minutes before the evaluation.
	{alert: "LimiterSourceUnavailable", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_source_errors_total", fire: "0+1x40", quiet: "0x37 1x3"},
	}},
	{alert: "LimiterSourceErrors", labels: []string{"job", "instance", "op"}, series: []seriesSpec{
		counter("limiter_source_operation_errors_total", map[string]string{"op": "spend"}),
	}},
	{alert: "LimiterFailingOpen", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_degraded_answers_total", fire: "0+1x40", quiet: "0x37 1x3"},
	}},
	// Fires for as long as the files in place fail, long after the one
	// failed attempt; quiet: a failure put right since.
	{alert: "LimiterConfigReloadFailed", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_config_last_reload_successful", fire: "1x10 0x30", quiet: "1x10 0x10 1x20"},
	}},
	{alert: "LimiterMemoryEvictingActiveBuckets", labels: []string{"job", "instance"}, series: []seriesSpec{
		counter("limiter_memory_evictions_not_full_total", nil),
	}},
	{alert: "LimiterRateCounterEvictions", labels: []string{"job", "instance"}, series: []seriesSpec{
		counter("limiter_memory_rate_counter_evictions_total", nil),
	}},
	{alert: "LimiterPenaltyBoxEvictions", labels: []string{"job", "instance"}, series: []seriesSpec{
		counter("limiter_memory_penalty_box_evictions_total", nil),
	}},
	{alert: "LimiterIdempotencyRecordsEvicted", labels: []string{"job", "instance"}, series: []seriesSpec{
		counter("limiter_memory_idempotency_evictions_total", nil),
	}},
	{alert: "LimiterSyncFailing", labels: []string{"job", "instance"}, series: []seriesSpec{
		counter("limiter_sync_failures_total", map[string]string{"trigger": "timer"}),
	}},
	{alert: "LimiterSyncHitsLost", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_local_evictions_lost_total", fire: "0x30 5x10", quiet: "5x40"},
	}},
	{alert: "LimiterHTTPErrors", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_http_request_duration_seconds_count", match: map[string]string{"route": "/v1/spend", "status": "200"},
			set: map[string]string{"status": "500"}, fire: "0+10x40", quiet: "0x40"},
		{name: "limiter_http_request_duration_seconds_count", match: map[string]string{"route": "/v1/spend", "status": "200"},
			fire: "0+100x40", quiet: "0+100x40"},
		// 503s are the source's, and LimiterSourceUnavailable's.
		{name: "limiter_http_request_duration_seconds_count", match: map[string]string{"route": "/v1/refund", "status": "503"},
			fire: "0x40", quiet: "0+50x40"},
	}},
	{alert: "LimiterSlowDecisions", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_http_request_duration_seconds_bucket", match: map[string]string{"route": "/v1/spend", "status": "200"},
			buckets: func(le float64) (string, string) {
				if le < 0.1 {
					return "0x40", "0+10x40" // fire: every request above 50 ms; quiet: all under the first bound
				}
				return "0+10x40", "0+10x40"
			}},
	}},
	{alert: "LimiterGRPCErrors", labels: []string{"job", "instance"}, series: []seriesSpec{
		{name: "limiter_grpc_request_duration_seconds_count", match: map[string]string{"method": shouldRateLimit, "code": "OK"},
			set: map[string]string{"code": "Unavailable"}, fire: "0+10x40", quiet: "0x40"},
		{name: "limiter_grpc_request_duration_seconds_count", match: map[string]string{"method": shouldRateLimit, "code": "OK"},
			fire: "0+100x40", quiet: "0+100x40"},
	}},
}

// promTest is promtool's unit-test file.
type promTest struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval string          `yaml:"evaluation_interval"`
	Tests              []promTestGroup `yaml:"tests"`
}

type promTestGroup struct {
	Interval       string          `yaml:"interval"`
	InputSeries    []inputSeries   `yaml:"input_series"`
	AlertRuleTests []alertRuleTest `yaml:"alert_rule_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertRuleTest struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// madeSeries is one input series: its labels (job and instance included)
// and its values.
type madeSeries struct {
	name   string
	labels map[string]string
	values string
}

func (s madeSeries) String() string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(s.labels[k])
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

// makeSeries expands spec from the scrape, with its fire or quiet values.
func makeSeries(exp *exposition, spec seriesSpec, fire bool) ([]madeSeries, error) {
	base := map[string]string{}
	if !prometheusMade[spec.name] {
		found := exp.find(spec.name, spec.match)
		if len(found) == 0 {
			return nil, fmt.Errorf("the scrape has no %s with labels %v", spec.name, spec.match)
		}
		for k, v := range found[0].labels {
			base[k] = v
		}
	} else if len(spec.match)+len(spec.set) > 0 {
		return nil, fmt.Errorf("%s: Prometheus's own series has job and instance only", spec.name)
	}
	for k, v := range spec.set {
		if _, ok := base[k]; !ok {
			return nil, fmt.Errorf("%s has no label %s in the scrape", spec.name, k)
		}
		base[k] = v
	}
	if _, ok := base["job"]; ok {
		return nil, fmt.Errorf("%s has a job label of its own", spec.name)
	}
	base["job"], base["instance"] = testJob, testInstance
	pick := func(f, q string) string {
		if fire {
			return f
		}
		return q
	}
	if spec.buckets == nil {
		return []madeSeries{{spec.name, base, pick(spec.fire, spec.quiet)}}, nil
	}
	if !strings.HasSuffix(spec.name, "_bucket") {
		return nil, fmt.Errorf("%s: buckets are for a histogram's _bucket series", spec.name)
	}
	// One series per bound the scrape has for this label set.
	match := map[string]string{}
	for k, v := range base {
		if k != "le" && k != "job" && k != "instance" {
			match[k] = v
		}
	}
	if len(spec.set) > 0 {
		return nil, fmt.Errorf("%s: set is not for buckets", spec.name)
	}
	var out []madeSeries
	for _, s := range exp.find(spec.name, match) {
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: le %q: %v", spec.name, s.labels["le"], err)
		}
		labels := map[string]string{}
		for k, v := range base {
			labels[k] = v
		}
		labels["le"] = s.labels["le"]
		out = append(out, madeSeries{spec.name, labels, pick(spec.buckets(le))})
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s%v: %d buckets in the scrape", spec.name, match, len(out))
	}
	return out, nil
}

// renderAnnotation expands an annotation template as Prometheus does for
// an alert with labels; $value is refused, since its formatting is
// Prometheus's.
func renderAnnotation(text string, labels map[string]string) (string, error) {
	if strings.Contains(text, "$value") || strings.Contains(text, ".Value") {
		return "", fmt.Errorf("%q: the test renders $labels only", text)
	}
	tmpl, err := template.New("").Option("missingkey=zero").Parse("{{$labels := .Labels}}" + text)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, struct{ Labels map[string]string }{labels}); err != nil {
		return "", err
	}
	return b.String(), nil
}

func checkAlertRules(t *testing.T, promtool string, exp *exposition) {
	rulesPath := filepath.Join(repoRoot, alertsFile)
	out, err := exec.Command(promtool, "check", "rules", rulesPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	exported := exp.names()
	rules := readRules(t)
	byName := map[string]rule{}
	var names []string
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert", r.Record)
			continue
		}
		if _, dup := byName[r.Alert]; dup {
			t.Errorf("alert %s twice", r.Alert)
		}
		byName[r.Alert] = r
		names = append(names, r.Alert)
		checkExprNames(t, "alert "+r.Alert, r.Expr, exported)
		if r.For == "" {
			t.Errorf("alert %s has no for:", r.Alert)
		}
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s lacks a summary or a description", r.Alert)
		}
	}
	cased := map[string]bool{}
	for _, c := range alertCases {
		if _, ok := byName[c.alert]; !ok {
			t.Errorf("a test case for %s, which %s does not have", c.alert, alertsFile)
		}
		cased[c.alert] = true
	}
	for _, n := range names {
		if !cased[n] {
			t.Errorf("alert %s has no test case: add one to alertCases", n)
		}
	}
	if t.Failed() {
		return
	}

	// One test group per case and per way (fire, quiet), each with only
	// the case's series: in the first its alert fires and no other does;
	// in the second none fires.
	file := promTest{RuleFiles: []string{rulesPath}, EvaluationInterval: "1m"}
	for _, c := range alertCases {
		for _, fire := range []bool{true, false} {
			g := promTestGroup{Interval: "1m"}
			for _, spec := range c.series {
				made, err := makeSeries(exp, spec, fire)
				if err != nil {
					t.Fatalf("%s: %v", c.alert, err)
				}
				for _, s := range made {
					g.InputSeries = append(g.InputSeries, inputSeries{Series: s.String(), Values: s.values})
				}
			}
			first, err := makeSeries(exp, c.series[0], fire)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				test := alertRuleTest{EvalTime: evalTime, Alertname: n, ExpAlerts: []expAlert{}}
				if fire && n == c.alert {
					r := byName[n]
					labels := map[string]string{}
					for _, l := range c.labels {
						v, ok := first[0].labels[l]
						if !ok {
							t.Fatalf("%s: its first series has no label %s", c.alert, l)
						}
						labels[l] = v
					}
					annotations := map[string]string{}
					for k, text := range r.Annotations {
						if annotations[k], err = renderAnnotation(text, labels); err != nil {
							t.Fatalf("alert %s, annotation %s: %v", n, k, err)
						}
					}
					for k, v := range r.Labels {
						labels[k] = v
					}
					test.ExpAlerts = []expAlert{{ExpLabels: labels, ExpAnnotations: annotations}}
				}
				g.AlertRuleTests = append(g.AlertRuleTests, test)
			}
			file.Tests = append(file.Tests, g)
		}
	}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	testPath := filepath.Join(t.TempDir(), "alerts_test.yaml")
	if err := os.WriteFile(testPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", testPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nthe test file, made from the scrape:\n%s", err, out, b)
	}
}

// grafanaPanel is what the test reads of a dashboard's panel: its queries,
// and the panels of a row.
type grafanaPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDashboard struct {
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

var (
	grafanaRangeVar = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b`)
	grafanaVar      = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
	labelValuesRe   = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
)

// asPromQL is a dashboard query with Grafana's variables replaced by what
// PromQL can parse.
func asPromQL(expr string) string {
	expr = grafanaRangeVar.ReplaceAllString(expr, "5m")
	return grafanaVar.ReplaceAllString(expr, ".*")
}

func checkDashboard(t *testing.T, promtool string, exp *exposition) {
	b, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: no title or uid", dashboardFile)
	}
	exported := exp.names()
	type query struct{ where, expr string }
	var queries []query
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q, query %d: no expr", p.Title, i)
					continue
				}
				queries = append(queries, query{fmt.Sprintf("panel %q", p.Title), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := labelValuesRe.FindStringSubmatch(q); m != nil {
			queries = append(queries, query{fmt.Sprintf("variable %s", v.Name), m[1]})
		} else {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q)
		}
	}
	if len(queries) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	named := map[string]bool{}
	for _, q := range queries {
		checkExprNames(t, q.where, asPromQL(q.expr), exported)
		for _, n := range metricNames(asPromQL(q.expr)) {
			named[n] = true
		}
	}
	// What the dashboard is for: each of these has a panel.
	for _, n := range []string{
		"limiter_decisions_total", "limiter_http_request_duration_seconds_bucket",
		"limiter_source_operation_duration_seconds_bucket", "limiter_source_operation_errors_total",
		"limiter_source_errors_total", "limiter_degraded_answers_total", "limiter_config_reloads_total",
		"limiter_config_reload_failures_total", "limiter_memory_buckets", "limiter_memory_evictions_total",
		"limiter_memory_evictions_not_full_total", "limiter_grpc_request_duration_seconds_count",
		"limiter_grpc_request_duration_seconds_bucket", "limiter_sync_failures_total",
		"process_cpu_seconds_total", "process_resident_memory_bytes",
	} {
		if !named[n] {
			t.Errorf("%s: no query reads %s", dashboardFile, n)
		}
	}

	// Every query parses as PromQL: promtool checks them as recording rules.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range queries {
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, strconv.Quote(asPromQL(q.expr)))
	}
	path := filepath.Join(t.TempDir(), "dashboard_rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not all parse: %v\n%s\n%s", err, out, rules.String())
	}
}

// A guard against a quiet test: metricNames finds the metrics of
// expressions of the forms the rules and dashboard use, and nothing else.
func TestAlertsMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`up{job="limiter"} == 0`: "up",
		`sum by (job, instance, op) (rate(limiter_source_operation_errors_total{op!="ping"}[5m])) > 0`:                      "limiter_source_operation_errors_total",
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket{route=~"/v1/(spend|check)"}[$__rate_interval])))`:              "a_bucket",
		`changes(process_start_time_seconds[15m]) > 2 and on (job, instance) limiter_config_last_success_timestamp_seconds`: "process_start_time_seconds limiter_config_last_success_timestamp_seconds",
		`sum(rate(x_total[5m])) without (op) / ignoring (code) group_left sum(rate(y_total[5m] offset 1h)) > 1e3`:           "x_total y_total",
		`time() - limiter_config_last_success_timestamp_seconds{instance=~"$instance"}`:                                     "limiter_config_last_success_timestamp_seconds",
		`sum by (limit) (rate(limiter_decisions_total{outcome="denied"}[$__rate_interval])) or vector(0)`:                   "limiter_decisions_total",
		`limiter_memory_buckets`: "limiter_memory_buckets",
	} {
		if got := strings.Join(metricNames(asPromQL(expr)), " "); got != want {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// The text format parser reads label values with escapes and braces.
func TestAlertsParseExposition(t *testing.T) {
	e, err := parseExposition("# HELP a_total x\n# TYPE a_total counter\n" +
		`a_total{route="/v1/limits/{limit}/{id}",msg="say \"hi\"\\ back"} 3` + "\n" +
		"b 1.5e+06 1700000000000\n")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := e.value("a_total", map[string]string{"route": "/v1/limits/{limit}/{id}", "msg": `say "hi"\ back`}); !ok || v != 3 {
		t.Errorf("a_total: %v %v", v, ok)
	}
	if v, ok := e.value("b", nil); !ok || v != 1.5e6 {
		t.Errorf("b: %v %v", v, ok)
	}
	if e.types["a_total"] != "counter" {
		t.Errorf("types: %v", e.types)
	}
	for _, bad := range []string{`a{x="1"`, `a{x=1} 2`, `a{x="1",x="2"} 3`, `a 1 2 3`, `{x="1"} 2`} {
		if _, err := parseExposition(bad + "\n"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
