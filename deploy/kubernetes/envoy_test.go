package kubernetes

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const envoySnippet = "envoy-ratelimit.yaml"

// envoyPieces is the snippet decoded: each key is a field of Envoy's
// configuration that takes a list, and each element is decoded into that
// list's message.
type envoyPieces struct {
	filters      []*hcmv3.HttpFilter
	virtualHosts []*routev3.VirtualHost
	clusters     []*clusterv3.Cluster
}

// decodeEnvoy decodes the snippet strictly: protojson refuses unknown
// fields, the typed configurations are unpacked into their types, and every
// message passes its own validation rules.
func decodeEnvoy(snippet []byte) (*envoyPieces, error) {
	j, err := yaml.YAMLToJSONStrict(snippet)
	if err != nil {
		return nil, err
	}
	var top map[string][]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil {
		return nil, fmt.Errorf("want a mapping of lists: %v", err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, []string{"clusters", "http_filters", "virtual_hosts"}) {
		return nil, fmt.Errorf("top-level keys %q, want clusters, http_filters and virtual_hosts", keys)
	}
	var pieces envoyPieces
	decode := func(key string, raw json.RawMessage, m interface {
		proto.Message
		ValidateAll() error
	}) error {
		if err := protojson.Unmarshal(raw, m); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
		if err := m.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
		return nil
	}
	for _, raw := range top["http_filters"] {
		f := &hcmv3.HttpFilter{}
		if err := decode("http_filters", raw, f); err != nil {
			return nil, err
		}
		pieces.filters = append(pieces.filters, f)
	}
	for _, raw := range top["virtual_hosts"] {
		vh := &routev3.VirtualHost{}
		if err := decode("virtual_hosts", raw, vh); err != nil {
			return nil, err
		}
		pieces.virtualHosts = append(pieces.virtualHosts, vh)
	}
	for _, raw := range top["clusters"] {
		c := &clusterv3.Cluster{}
		if err := decode("clusters", raw, c); err != nil {
			return nil, err
		}
		pieces.clusters = append(pieces.clusters, c)
	}
	return &pieces, nil
}

// descriptorRules is the descriptors file: domain -> the keys of each rule.
func descriptorRules(b []byte) (map[string][][]string, error) {
	var doc []struct {
		Domain      string `json:"domain"`
		Descriptors []struct {
			Keys  []string `json:"keys"`
			Limit string   `json:"limit"`
		} `json:"descriptors"`
	}
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, err
	}
	rules := map[string][][]string{}
	for _, d := range doc {
		for _, r := range d.Descriptors {
			rules[d.Domain] = append(rules[d.Domain], r.Keys)
		}
	}
	return rules, nil
}

// actionKey is the key of the descriptor entry an action sends.
func actionKey(a *routev3.RateLimit_Action) (string, error) {
	switch {
	case a.GetRemoteAddress() != nil:
		return "remote_address", nil
	case a.GetSourceCluster() != nil:
		return "source_cluster", nil
	case a.GetDestinationCluster() != nil:
		return "destination_cluster", nil
	case a.GetRequestHeaders() != nil:
		return a.GetRequestHeaders().GetDescriptorKey(), nil
	case a.GetGenericKey() != nil:
		if k := a.GetGenericKey().GetDescriptorKey(); k != "" {
			return k, nil
		}
		return "generic_key", nil
	}
	return "", fmt.Errorf("action %v: not one this test knows the key of", a)
}

// checkEnvoy checks the snippet against the base's Service, its descriptors
// file and the longest source timeout of the kustomizations.
func checkEnvoy(snippet []byte, base *rendering, sourceTimeout time.Duration) problems {
	var p problems
	pieces, err := decodeEnvoy(snippet)
	if err != nil {
		p.add("%v", err)
		return p
	}
	v := base.view()
	svc := v.services[limiterName]
	if svc == nil {
		p.add("no Service %s", limiterName)
		return p
	}
	var grpcPort int32
	for _, sp := range svc.Spec.Ports {
		if sp.Name == "grpc" {
			grpcPort = sp.Port
		}
	}
	var descriptors []byte
	for _, cm := range v.configMaps {
		if d, ok := cm.Data["descriptors.yaml"]; ok {
			descriptors = []byte(d)
		}
	}
	rules, err := descriptorRules(descriptors)
	if err != nil {
		p.add("descriptors.yaml of the ConfigMap: %v", err)
		return p
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range pieces.clusters {
		clusters[c.GetName()] = c
	}
	stageDomain := map[uint32]string{}
	for _, f := range pieces.filters {
		rl := &ratelimitv3.RateLimit{}
		if f.GetName() != "envoy.filters.http.ratelimit" || f.GetTypedConfig().UnmarshalTo(rl) != nil {
			p.add("http filter %s: want envoy.filters.http.ratelimit with a RateLimit configuration", f.GetName())
			continue
		}
		if _, ok := rules[rl.GetDomain()]; !ok {
			p.add("filter of domain %q: the descriptors file has no such domain", rl.GetDomain())
		}
		if d, dup := stageDomain[rl.GetStage()]; dup {
			p.add("two filters of stage %d (%s and %s)", rl.GetStage(), d, rl.GetDomain())
		}
		stageDomain[rl.GetStage()] = rl.GetDomain()
		if to := rl.GetTimeout().AsDuration(); to <= sourceTimeout {
			p.add("filter of domain %s: timeout %v, want it above the limiter's --source-timeout %v", rl.GetDomain(), to, sourceTimeout)
		}
		svcCfg := rl.GetRateLimitService()
		if svcCfg.GetTransportApiVersion().String() != "V3" {
			p.add("filter of domain %s: transport_api_version %v, want V3", rl.GetDomain(), svcCfg.GetTransportApiVersion())
		}
		name := svcCfg.GetGrpcService().GetEnvoyGrpc().GetClusterName()
		if clusters[name] == nil {
			p.add("filter of domain %s: cluster %q is not in the snippet", rl.GetDomain(), name)
		}
	}

	for _, vh := range pieces.virtualHosts {
		for _, r := range vh.GetRoutes() {
			for _, rl := range r.GetRoute().GetRateLimits() {
				stage := rl.GetStage().GetValue()
				domain, ok := stageDomain[stage]
				if !ok {
					p.add("route %s: a rate limit of stage %d, which no filter sends", r.GetMatch().GetPrefix(), stage)
					continue
				}
				var keys []string
				for _, a := range rl.GetActions() {
					k, err := actionKey(a)
					if err != nil {
						p.add("route %s: %v", r.GetMatch().GetPrefix(), err)
					}
					keys = append(keys, k)
				}
				if !slices.ContainsFunc(rules[domain], func(rk []string) bool { return slices.Equal(rk, keys) }) {
					p.add("route %s: descriptor %q of domain %s matches no rule of the descriptors file", r.GetMatch().GetPrefix(), keys, domain)
				}
			}
		}
	}

	for name, c := range clusters {
		if t := c.GetType(); t != clusterv3.Cluster_STRICT_DNS && t != clusterv3.Cluster_LOGICAL_DNS {
			p.add("cluster %s: type %v, want STRICT_DNS or LOGICAL_DNS to resolve the Service's name", name, t)
		}
		opts := &upstreamhttpv3.HttpProtocolOptions{}
		any := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
		if any == nil || any.UnmarshalTo(opts) != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
			p.add("cluster %s: no explicit HTTP/2 (gRPC is HTTP/2)", name)
		}
		n := 0
		for _, le := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range le.GetLbEndpoints() {
				n++
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				host, port := sa.GetAddress(), sa.GetPortValue()
				first, rest, _ := strings.Cut(host, ".")
				ns, suffix, _ := strings.Cut(rest, ".")
				if first != svc.Name || !(rest == "" || (ns != "" && (suffix == "svc" || suffix == "svc.cluster.local"))) {
					p.add("cluster %s: address %s, want the Service's name %s (alone, or as %s.<namespace>.svc[.cluster.local])", name, host, svc.Name, svc.Name)
				}
				if port != uint32(grpcPort) {
					p.add("cluster %s: port %d, want the Service's grpc port %d", name, port, grpcPort)
				}
				if net.ParseIP(host) != nil {
					p.add("cluster %s: an IP address; pods come and go, use the Service's name", name)
				}
			}
		}
		if n == 0 {
			p.add("cluster %s: no endpoint", name)
		}
	}
	return p
}

// longestSourceTimeout is the longest --source-timeout any kustomization
// sets: Envoy's filter timeout must be above it.
func longestSourceTimeout(t testing.TB, renders map[string]*rendering, h serveHelp) time.Duration {
	t.Helper()
	var longest time.Duration
	for _, r := range renders {
		dep := r.view().deployments[limiterName]
		if dep == nil {
			t.Fatalf("%s: no Deployment %s", r.dir, limiterName)
		}
		l := limiter{dep: dep, help: h, args: map[string]string{}, env: map[string]corev1.EnvVar{}}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			l.env[e.Name] = e
		}
		d, err := l.duration("source-timeout")
		if err != nil {
			t.Fatal(err)
		}
		longest = max(longest, d)
	}
	return longest
}

// TestEnvoySnippet decodes the snippet strictly and checks it against the
// base, and mutated copies of it to show the checks bite.
func TestEnvoySnippet(t *testing.T) {
	h := limiterHelp(t)
	renders := renderAll(t)
	timeout := longestSourceTimeout(t, renders, h)
	snippet, err := os.ReadFile(envoySnippet)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, old, new, want string }{
		{name: "as committed"},
		{"a misspelt field", "failure_mode_deny:", "failure_mode_denied:", `unknown field "failure_mode_denied"`},
		{"a misspelt field in a route", "skip_if_absent:", "skip_if_missing:", `unknown field "skip_if_missing"`},
		{"a value Envoy's rules refuse", "connect_timeout: 1s", "connect_timeout: 0s", "ConnectTimeout"},
		{"the Service's HTTP port", "port_value: 8081", "port_value: 8080", "port 8080, want the Service's grpc port 8081"},
		{"another Service", "address: limiter.default.svc", "address: ratelimit.default.svc", "want the Service's name limiter"},
		{"a domain the descriptors file lacks", "domain: signup", "domain: signups", `domain "signups": the descriptors file has no such domain`},
		{"a descriptor no rule matches", "descriptor_key: endpoint", "descriptor_key: route", `descriptor ["api_key" "route"] of domain edge matches no rule`},
		{"a timeout below the limiter's", "timeout: 0.25s", "timeout: 0.05s", "timeout 50ms, want it above"},
		{"HTTP/1 to the gRPC port", "http2_protocol_options: {}", "http_protocol_options: {}", "no explicit HTTP/2"},
		{"a filter naming another cluster", "cluster_name: limiter", "cluster_name: ratelimit", `cluster "ratelimit" is not in the snippet`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := snippet
			if c.old != "" {
				if !strings.Contains(string(s), c.old) {
					t.Fatalf("mutation: %q not in %s", c.old, envoySnippet)
				}
				s = []byte(strings.Replace(string(s), c.old, c.new, 1))
			}
			found := checkEnvoy(s, renders["base"], timeout)
			if c.want == "" {
				for _, pr := range found {
					t.Error(pr)
				}
				return
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("no problem with %q; found:\n%s", c.want, strings.Join(found, "\n"))
			}
		})
	}
}
