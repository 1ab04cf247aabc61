package kubernetes

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The names the manifests give the limiter's Deployment, its container and
// its Service, and what the image is: the binary at /limiter, run as 65532.
const (
	limiterName = "limiter"
	limiterUID  = 65532
)

var limiterCommand = []string{"/limiter", "serve"}

// The configuration files the limiter reads, by flag: the ConfigMap must
// hold exactly these, where the flags' variables say.
var configFlags = []string{"defaults", "overrides", "descriptors", "forward-auth"}

// view indexes one rendering's objects by kind and name.
type view struct {
	dir         string
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	pdbs        map[string]*policyv1.PodDisruptionBudget
	secrets     []string
}

func (r *rendering) view() view {
	v := view{
		dir:         r.dir,
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
	}
	for _, o := range r.objects {
		switch x := o.obj.(type) {
		case *appsv1.Deployment:
			v.deployments[o.name] = x
		case *corev1.Service:
			v.services[o.name] = x
		case *corev1.ConfigMap:
			v.configMaps[o.name] = x
		case *policyv1.PodDisruptionBudget:
			v.pdbs[o.name] = x
		case *corev1.Secret:
			v.secrets = append(v.secrets, o.name)
		}
	}
	return v
}

// limiter is the limiter's container in a rendering, and the settings it
// starts with.
type limiter struct {
	dep  *appsv1.Deployment
	c    corev1.Container
	help serveHelp
	args map[string]string // flag -> value given in args
	env  map[string]corev1.EnvVar
}

// setting is the value a flag takes: from the container's arguments, else
// its variable, else the default `limiter serve --help` prints. A variable
// from a Secret has no value here.
func (l limiter) setting(flag string) string {
	if v, ok := l.args[flag]; ok {
		return v
	}
	for name, e := range l.env {
		if l.help.envFlag[name] == flag {
			return e.Value
		}
	}
	return l.help.defaults[flag]
}

func (l limiter) duration(flag string) (time.Duration, error) {
	v := l.setting(flag)
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("--%s: %q is not a duration", flag, v)
	}
	return d, nil
}

// listenPort is the port of a listen address (":8080", "0.0.0.0:8080").
func (l limiter) listenPort(flag string) (int32, error) {
	v := l.setting(flag)
	_, p, err := net.SplitHostPort(v)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: %v", flag, v, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--%s %q: want a fixed port, for the Service and the probes", flag, v)
	}
	return int32(n), nil
}

// containerPort resolves a probe's or a Service's target port, by name or
// number, in the container's ports.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// selects says whether a selector picks pods of these labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// problems collects what a check finds, as sentences.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check is every check of one rendering against the binary's help and the
// bundled configuration files (by name).
func check(r *rendering, h serveHelp, bundled map[string][]byte) problems {
	var p problems
	v := r.view()
	for _, s := range v.secrets {
		p.add("Secret %s is rendered: tokens and passwords are created by hand, never committed", s)
	}
	dep, ok := v.deployments[limiterName]
	if !ok {
		p.add("no Deployment %s", limiterName)
		return p
	}
	l := limiter{dep: dep, help: h, args: map[string]string{}, env: map[string]corev1.EnvVar{}}
	containers := dep.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == limiterName })
	if i < 0 {
		p.add("Deployment %s has no container %s", limiterName, limiterName)
		return p
	}
	l.c = containers[i]
	p = append(p, checkSettings(&l)...)
	p = append(p, checkPorts(v, l)...)
	p = append(p, checkFiles(v, l, bundled)...)
	p = append(p, checkPod(v, l)...)
	for _, d := range v.deployments {
		p = append(p, checkHardening(d)...)
	}
	p = append(p, checkServices(v)...)
	return p
}

// checkSettings: the command is the image's binary, every flag and variable
// exists in it, the source suits the replicas. The values themselves are
// judged by the binary, started with them (TestStartWithManifestSettings).
func checkSettings(l *limiter) problems {
	var p problems
	if !slices.Equal(l.c.Command, limiterCommand) {
		p.add("command %q, want %q (the image's binary)", l.c.Command, limiterCommand)
	}
	for _, a := range l.c.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !l.help.flags[name] {
			p.add("argument %q: limiter serve has no such flag (write --name=value)", a)
			continue
		}
		l.args[name] = value
	}
	for _, e := range l.c.Env {
		if _, dup := l.env[e.Name]; dup {
			p.add("variable %s set twice", e.Name)
		}
		l.env[e.Name] = e
		switch {
		case strings.HasPrefix(e.Name, "LIMITER_"):
			if _, ok := l.help.envFlag[e.Name]; !ok {
				p.add("variable %s: limiter serve --help names no such variable", e.Name)
			}
		case e.Name == "GOMEMLIMIT" || e.Name == "GOGC" || e.Name == "GOMAXPROCS":
		default:
			p.add("variable %s: not a limiter setting", e.Name)
		}
		if e.ValueFrom != nil {
			if ref := e.ValueFrom.SecretKeyRef; ref == nil || ref.Name == "" || ref.Key == "" {
				p.add("variable %s: valueFrom must be a secretKeyRef with a name and a key", e.Name)
			}
		}
	}
	if lf := l.setting("log-format"); lf != "json" {
		p.add("--log-format %q: want json (and the start test reads it)", lf)
	}
	src := l.setting("source")
	replicas := int32(1)
	if l.dep.Spec.Replicas != nil {
		replicas = *l.dep.Spec.Replicas
	}
	switch u, err := url.Parse(src); {
	case src == "memory":
		if replicas != 1 {
			p.add("%d replicas on the memory source: each would count alone and allow the whole limit; run 1, or share Redis", replicas)
		}
	case err == nil && slices.Contains([]string{"redis", "rediss", "redis-cluster", "rediss-cluster"}, u.Scheme):
		if replicas < 2 {
			p.add("%d replica on a shared Redis source: run 2 or more", replicas)
		}
		if u.User != nil {
			if _, set := u.User.Password(); set {
				p.add("--source has a password in the URL: give it with LIMITER_REDIS_PASSWORD from a Secret")
			}
		}
	default:
		p.add("--source %q: neither memory nor a Redis URL", src)
	}
	return p
}

// checkPorts: the listeners the variables set are the container's ports,
// the probes' and the Service's.
func checkPorts(v view, l limiter) problems {
	var p problems
	httpPort, err := l.listenPort("listen")
	if err != nil {
		p.add("%v", err)
	}
	grpcPort, err := l.listenPort("grpc-listen")
	if err != nil {
		p.add("%v", err)
	}
	for name, want := range map[string]int32{"http": httpPort, "grpc": grpcPort} {
		if got, ok := containerPort(l.c, intstr.FromString(name)); !ok || got != want {
			p.add("container port %s is %d, want %d, where the limiter listens", name, got, want)
		}
	}
	probes := []struct {
		what, path string
		probe      *corev1.Probe
	}{
		{"readiness", "/readyz", l.c.ReadinessProbe},
		{"liveness", "/healthz", l.c.LivenessProbe},
	}
	for _, pr := range probes {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			p.add("no %s probe (HTTP GET %s)", pr.what, pr.path)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path {
			p.add("%s probe on %s, want %s", pr.what, g.Path, pr.path)
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			p.add("%s probe scheme %s: the limiter serves plain HTTP", pr.what, g.Scheme)
		}
		if got, ok := containerPort(l.c, g.Port); !ok || got != httpPort {
			p.add("%s probe on port %s (%d), want %d, where --listen binds", pr.what, g.Port.String(), got, httpPort)
		}
	}
	svc, ok := v.services[limiterName]
	if !ok {
		p.add("no Service %s", limiterName)
		return p
	}
	if !selects(svc.Spec.Selector, l.dep.Spec.Template.Labels) {
		p.add("Service %s selects %v, not the limiter's pods %v", limiterName, svc.Spec.Selector, l.dep.Spec.Template.Labels)
	}
	for _, want := range []struct {
		name, appProtocol string
		port              int32
	}{{"http", "http", httpPort}, {"grpc", "grpc", grpcPort}} {
		i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == want.name })
		if i < 0 {
			p.add("Service %s has no port %s", limiterName, want.name)
			continue
		}
		sp := svc.Spec.Ports[i]
		if got, ok := containerPort(l.c, sp.TargetPort); !ok || got != want.port {
			p.add("Service port %s targets %s (%d), want %d", want.name, sp.TargetPort.String(), got, want.port)
		}
		if sp.AppProtocol == nil || *sp.AppProtocol != want.appProtocol {
			p.add("Service port %s: appProtocol %v, want %s", want.name, sp.AppProtocol, want.appProtocol)
		}
	}
	return p
}

// mountedFile finds what provides the file at an absolute path in the
// limiter's container: the mount holding it, and the key (of a ConfigMap or
// Secret) the file is made of.
type mountedFile struct {
	volume     corev1.Volume
	mount      corev1.VolumeMount
	key        string // the ConfigMap's or Secret's key
	configMap  string // or
	secretName string
}

func findFile(l limiter, file string) (mountedFile, error) {
	dir, base := path.Split(file)
	dir = strings.TrimSuffix(dir, "/")
	for _, m := range l.c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		i := slices.IndexFunc(l.dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return mountedFile{}, fmt.Errorf("%s: mount %s has no volume", file, m.Name)
		}
		vol := l.dep.Spec.Template.Spec.Volumes[i]
		if m.SubPath != "" || m.SubPathExpr != "" {
			return mountedFile{}, fmt.Errorf("%s: mount %s uses a subPath, which an update never reaches", file, m.Name)
		}
		f := mountedFile{volume: vol, mount: m}
		var items []corev1.KeyToPath
		switch {
		case vol.ConfigMap != nil:
			f.configMap, items = vol.ConfigMap.Name, vol.ConfigMap.Items
		case vol.Secret != nil:
			f.secretName, items = vol.Secret.SecretName, vol.Secret.Items
		default:
			return mountedFile{}, fmt.Errorf("%s: volume %s is neither a ConfigMap nor a Secret", file, vol.Name)
		}
		f.key = base
		if len(items) > 0 {
			j := slices.IndexFunc(items, func(kp corev1.KeyToPath) bool { return kp.Path == base })
			if j < 0 {
				return mountedFile{}, fmt.Errorf("%s: volume %s lists items without it", file, vol.Name)
			}
			f.key = items[j].Key
		}
		return f, nil
	}
	return mountedFile{}, fmt.Errorf("%s: no volume is mounted at %s", file, dir)
}

// checkFiles: every file a setting names is in a mounted ConfigMap or
// Secret; the ConfigMap holds exactly the four configuration files, the same
// as config/*.yaml; the admin token file is a Secret's, read by the
// limiter's group alone.
func checkFiles(v view, l limiter, bundled map[string][]byte) problems {
	var p problems
	cmKeys := map[string]map[string]bool{} // ConfigMap -> keys the settings name
	for _, flag := range slices.Sorted(maps.Keys(l.help.flags)) {
		val := l.setting(flag)
		if !strings.HasSuffix(flag, "-file") && !slices.Contains(configFlags, flag) && flag != "redis-tls-ca" {
			continue
		}
		if val == "" {
			continue
		}
		if !path.IsAbs(val) {
			p.add("--%s %q: want an absolute path in a mounted volume", flag, val)
			continue
		}
		f, err := findFile(l, val)
		if err != nil {
			p.add("--%s: %v", flag, err)
			continue
		}
		if f.configMap != "" {
			cm, ok := v.configMaps[f.configMap]
			if !ok {
				p.add("--%s: ConfigMap %s is not in the manifests", flag, f.configMap)
				continue
			}
			if _, ok := cm.Data[f.key]; !ok {
				p.add("--%s %s: ConfigMap %s has no key %s", flag, val, f.configMap, f.key)
			}
			if cmKeys[f.configMap] == nil {
				cmKeys[f.configMap] = map[string]bool{}
			}
			cmKeys[f.configMap][f.key] = true
		}
		if flag == "admin-token-file" || flag == "api-token-file" {
			if f.secretName == "" {
				p.add("--%s %s: want it from a Secret", flag, val)
			} else if m := f.volume.Secret.DefaultMode; m == nil || *m&0o007 != 0 {
				p.add("--%s: Secret volume %s is readable by any user; give it a defaultMode without bits for others (0440)", flag, f.volume.Name)
			}
		}
	}
	if adm := l.setting("admin-token-file"); adm == "" {
		p.add("no --admin-token-file: the limiter refuses to listen beyond loopback without one")
	}
	for name, cm := range v.configMaps {
		var keys, named []string
		for k := range cm.Data {
			keys = append(keys, k)
		}
		for k := range cmKeys[name] {
			named = append(named, k)
		}
		sort.Strings(keys)
		sort.Strings(named)
		if !slices.Equal(keys, named) {
			p.add("ConfigMap %s has keys %q, the settings name %q: want the same", name, keys, named)
		}
		for _, k := range keys {
			if b, ok := bundled[k]; !ok {
				p.add("ConfigMap %s key %s is no file of config/", name, k)
			} else if !bytes.Equal(b, []byte(cm.Data[k])) {
				p.add("ConfigMap %s key %s differs from config/%s", name, k, k)
			}
		}
	}
	return p
}

// checkPod: the pod around the limiter: its grace period, its links, its
// disruption budget.
func checkPod(v view, l limiter) problems {
	var p problems
	spec := l.dep.Spec.Template.Spec
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		p.add("enableServiceLinks is not false: a Service named %s would put LIMITER_* variables of its own in the limiter's environment", limiterName)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.add("automountServiceAccountToken is not false: the limiter never calls the Kubernetes API")
	}
	shutdown, err := l.duration("shutdown-timeout")
	if err != nil {
		p.add("%v", err)
	}
	var sleep time.Duration
	if lc := l.c.Lifecycle; lc != nil && lc.PreStop != nil && lc.PreStop.Sleep != nil {
		sleep = time.Duration(lc.PreStop.Sleep.Seconds) * time.Second
	}
	// The drain: the preStop sleep, requests in flight for up to
	// --shutdown-timeout, then the push of unsynced counts for up to as long
	// again.
	drain := sleep + 2*shutdown
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain {
		p.add("terminationGracePeriodSeconds %v is not above the drain, %v (preStop %v + 2 × --shutdown-timeout %v)", deref(g), drain, sleep, shutdown)
	}
	replicas := int32(1)
	if l.dep.Spec.Replicas != nil {
		replicas = *l.dep.Spec.Replicas
	}
	found := false
	for name, pdb := range v.pdbs {
		if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, l.dep.Spec.Template.Labels) || len(pdb.Spec.Selector.MatchExpressions) > 0 {
			p.add("PodDisruptionBudget %s does not select the limiter's pods by their labels", name)
			continue
		}
		found = true
		switch s := pdb.Spec; {
		case s.MaxUnavailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, int(replicas), true); err != nil || n < 1 {
				p.add("PodDisruptionBudget %s: maxUnavailable %s allows no disruption: node drains would block", name, s.MaxUnavailable.String())
			}
		case s.MinAvailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, int(replicas), true); err != nil || n >= int(replicas) {
				p.add("PodDisruptionBudget %s: minAvailable %s of %d replicas allows no disruption: node drains would block", name, s.MinAvailable.String(), replicas)
			}
		}
	}
	if !found {
		p.add("no PodDisruptionBudget for the limiter")
	}
	// The container's user, else the pod's.
	var uid *int64
	if spec.SecurityContext != nil {
		uid = spec.SecurityContext.RunAsUser
	}
	if l.c.SecurityContext != nil && l.c.SecurityContext.RunAsUser != nil {
		uid = l.c.SecurityContext.RunAsUser
	}
	if uid == nil || *uid != limiterUID {
		p.add("the limiter does not run as uid %d, the image's user, but %v", limiterUID, deref(uid))
	}
	return p
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// checkHardening: every container of a Deployment runs without root,
// privileges or a writable root file system, with the runtime's seccomp
// profile and set resources.
func checkHardening(d *appsv1.Deployment) problems {
	var p problems
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		where := fmt.Sprintf("Deployment %s container %s", d.Name, c.Name)
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if !ptrTrue(sc.RunAsNonRoot) && !ptrTrue(pod.RunAsNonRoot) {
			p.add("%s: runAsNonRoot is not true", where)
		}
		if !ptrTrue(sc.ReadOnlyRootFilesystem) {
			p.add("%s: readOnlyRootFilesystem is not true", where)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			p.add("%s: allowPrivilegeEscalation is not false", where)
		}
		if ptrTrue(sc.Privileged) {
			p.add("%s: privileged", where)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			p.add("%s: capabilities must drop ALL and add none", where)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			p.add("%s: seccompProfile is not RuntimeDefault", where)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim {
				p.add("%s: no %s request and limit", where, r)
			} else if req.Cmp(lim) > 0 || req.Cmp(resource.Quantity{}) <= 0 {
				p.add("%s: %s request %s is not between 0 and the limit %s", where, r, req.String(), lim.String())
			}
		}
	}
	return p
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// checkServices: every Service selects the pods of exactly one Deployment,
// and each of its target ports is a port of that Deployment's container; a
// Redis URL naming a Service of the manifests names one of its ports.
func checkServices(v view) problems {
	var p problems
	for name, svc := range v.services {
		var deps []*appsv1.Deployment
		for _, d := range v.deployments {
			if selects(svc.Spec.Selector, d.Spec.Template.Labels) {
				deps = append(deps, d)
			}
		}
		if len(deps) != 1 {
			p.add("Service %s selects the pods of %d Deployments, want 1", name, len(deps))
			continue
		}
		for _, sp := range svc.Spec.Ports {
			found := slices.ContainsFunc(deps[0].Spec.Template.Spec.Containers, func(c corev1.Container) bool {
				_, ok := containerPort(c, sp.TargetPort)
				return ok
			})
			if !found {
				p.add("Service %s port %s targets %s, which no container of Deployment %s has", name, sp.Name, sp.TargetPort.String(), deps[0].Name)
			}
		}
	}
	dep := v.deployments[limiterName]
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name != "LIMITER_SOURCE" {
				continue
			}
			u, err := url.Parse(e.Value)
			if err != nil || u.Host == "" {
				continue
			}
			for _, hp := range strings.Split(u.Host, ",") {
				host, port, err := net.SplitHostPort(hp)
				if err != nil {
					host, port = hp, "6379"
				}
				svcName, _, qualified := strings.Cut(host, ".")
				svc, ok := v.services[svcName]
				if !ok {
					if !qualified {
						p.add("LIMITER_SOURCE names %s, which is no Service of the manifests", host)
					}
					continue
				}
				if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return strconv.Itoa(int(sp.Port)) == port }) {
					p.add("LIMITER_SOURCE names port %s of Service %s, which has no such port", port, svcName)
				}
			}
		}
	}
	return p
}

// bundledConfig is config/*.yaml of the repository, by file name.
func bundledConfig(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("config/*.yaml: %v (%d files)", err, len(paths))
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestManifests runs every check on every kustomization as committed, and
// states what each one is for.
func TestManifests(t *testing.T) {
	h := limiterHelp(t)
	bundled := bundledConfig(t)
	renders := renderAll(t)
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			for _, pr := range check(renders[dir], h, bundled) {
				t.Error(pr)
			}
		})
	}
	want := []struct {
		dir, source string
		minReplicas int32
		password    bool
	}{
		{"base", "memory", 1, false},
		{"overlays/redis", "redis://redis:6379", 2, false},
		{"overlays/redis-managed", "rediss://", 2, true},
	}
	for _, w := range want {
		dep := renders[w.dir].view().deployments[limiterName]
		if dep == nil {
			continue // reported above
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e
		}
		if src := env["LIMITER_SOURCE"].Value; !strings.HasPrefix(src, w.source) {
			t.Errorf("%s: LIMITER_SOURCE %q, want %s", w.dir, src, w.source)
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas < w.minReplicas {
			t.Errorf("%s: replicas %v, want at least %d", w.dir, deref(dep.Spec.Replicas), w.minReplicas)
		}
		if pw, ok := env["LIMITER_REDIS_PASSWORD"]; w.password != ok || (ok && (pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil)) {
			t.Errorf("%s: LIMITER_REDIS_PASSWORD %+v: want it from a Secret: %v", w.dir, pw, w.password)
		}
	}
	if _, ok := renders["overlays/redis"].view().services["redis"]; !ok {
		t.Errorf("overlays/redis: no Service redis")
	}
}

// commentedEnv is an environment entry left commented out in a manifest,
// for the reader to turn on: its name must exist too.
var commentedEnv = regexp.MustCompile(`#\s*-\s*name:\s*(LIMITER_[A-Z0-9_]+)`)

// limiterWord is any limiter variable a manifest's text mentions.
var limiterWord = regexp.MustCompile(`LIMITER_[A-Z0-9_]*[A-Z0-9]`)

// TestManifestTextNamesRealVariables: the variables the manifests mention
// in comments (entries to uncomment, advice) exist, but for those
// Kubernetes would derive from a Service's name, which a comment explains.
func TestManifestTextNamesRealVariables(t *testing.T) {
	h := limiterHelp(t)
	links := map[string]bool{}
	for _, r := range renderAll(t) {
		for name := range r.view().services {
			n := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			links[n+"_SERVICE_HOST"], links[n+"_SERVICE_PORT"], links[n+"_PORT"] = true, true, true
		}
	}
	for file, b := range readTree(t) {
		if !strings.HasSuffix(file, ".yaml") || strings.HasPrefix(file, "base/config/") {
			continue
		}
		for _, m := range commentedEnv.FindAllSubmatch(b, -1) {
			if _, ok := h.envFlag[string(m[1])]; !ok {
				t.Errorf("%s: commented entry %s: limiter serve --help names no such variable", file, m[1])
			}
		}
		for _, w := range limiterWord.FindAll(b, -1) {
			if _, ok := h.envFlag[string(w)]; !ok && !links[string(w)] {
				t.Errorf("%s mentions %s: limiter serve --help names no such variable", file, w)
			}
		}
	}
	for name := range links {
		if flag, ok := h.envFlag[name]; ok {
			t.Errorf("a Service's link variable %s would be --%s's: rename the Service", name, flag)
		}
	}
}

// TestChecksBite mutates the manifests one way at a time, each a mistake
// the checks exist for, and expects the problem to be found.
func TestChecksBite(t *testing.T) {
	h := limiterHelp(t)
	bundled := bundledConfig(t)
	tr := readTree(t)
	cases := []struct {
		name, dir, file, old, new, want string
	}{
		{"readiness on a path the binary does not serve", "base", "base/deployment.yaml",
			"path: /readyz", "path: /ready", "readiness probe on /ready, want /readyz"},
		{"a listener moved away from the probes and the Service", "base", "base/deployment.yaml",
			`value: ":8080"`, `value: ":9090"`, "container port http is 8080, want 9090"},
		{"a variable the binary does not have", "base", "base/deployment.yaml",
			"LIMITER_FORWARD_AUTH", "LIMITER_FORWARDAUTH", "variable LIMITER_FORWARDAUTH: limiter serve --help names no such variable"},
		{"a config file the ConfigMap does not hold", "base", "base/deployment.yaml",
			"/etc/limiter/forward-auth.yaml", "/etc/limiter/forward_auth.yaml", "ConfigMap limiter-config has no key forward_auth.yaml"},
		{"a ConfigMap key no setting names", "base", "base/kustomization.yaml",
			"      - config/forward-auth.yaml\n", "      - config/forward-auth.yaml\n      - extra.yaml=config/defaults.yaml\n", `has keys ["defaults.yaml" "descriptors.yaml" "extra.yaml" "forward-auth.yaml" "overrides.yaml"]`},
		{"the token Secret mounted elsewhere", "base", "base/deployment.yaml",
			"mountPath: /run/secrets/limiter", "mountPath: /run/secrets/tokens", "--admin-token-file: /run/secrets/limiter/admin-tokens: no volume is mounted at /run/secrets/limiter"},
		{"a token file others may read", "base", "base/deployment.yaml",
			"defaultMode: 288", "defaultMode: 292", "readable by any user"},
		{"a grace period shorter than the drain", "base", "base/deployment.yaml",
			"value: 15s", "value: 30s", "terminationGracePeriodSeconds 40 is not above the drain, 1m5s"},
		{"two replicas on the memory source", "base", "base/deployment.yaml",
			"replicas: 1", "replicas: 2", "2 replicas on the memory source"},
		{"a gRPC port not marked as gRPC", "base", "base/service.yaml",
			"appProtocol: grpc", "appProtocol: http", "Service port grpc: appProtocol"},
		{"a writable root file system", "base", "base/deployment.yaml",
			"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "container limiter: readOnlyRootFilesystem is not true"},
		{"root", "base", "base/deployment.yaml",
			"runAsUser: 65532\n            runAsGroup", "runAsUser: 0\n            runAsGroup", "does not run as uid 65532"},
		{"service links on", "base", "base/deployment.yaml",
			"enableServiceLinks: false", "enableServiceLinks: true", "enableServiceLinks is not false"},
		{"a PodDisruptionBudget that blocks drains", "base", "base/poddisruptionbudget.yaml",
			"maxUnavailable: 1", "minAvailable: 1", "allows no disruption"},
		{"a Redis URL to a port the Service lacks", "overlays/redis", "overlays/redis/limiter-redis.yaml",
			"redis://redis:6379", "redis://redis:6380", "LIMITER_SOURCE names port 6380 of Service redis"},
		{"a Redis URL to a Service not there", "overlays/redis", "overlays/redis/limiter-redis.yaml",
			"redis://redis:6379", "redis://valkey:6379", "LIMITER_SOURCE names valkey"},
		{"one replica on Redis", "overlays/redis", "overlays/redis/kustomization.yaml",
			"count: 2", "count: 1", "1 replica on a shared Redis source"},
		{"a Redis password in the URL", "overlays/redis-managed", "overlays/redis-managed/limiter-redis.yaml",
			"rediss://redis.example", "rediss://:hunter2@redis.example", "password in the URL"},
		{"a token committed", "base", "base/kustomization.yaml",
			"configMapGenerator:", "secretGenerator:\n  - name: limiter-admin-tokens\n    literals:\n      - admin-tokens=changeme\nconfigMapGenerator:", "Secret limiter-admin-tokens"},
		{"a Redis Deployment without limits", "overlays/redis", "overlays/redis/redis.yaml",
			"            limits:\n              cpu: \"1\"\n              memory: 256Mi\n", "", "Deployment redis container redis: no cpu request and limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := render(tr.with(t, c.file, c.old, c.new), c.dir)
			if err != nil {
				t.Fatal(err)
			}
			found := check(r, h, bundled)
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("no problem with %q; found:\n%s", c.want, strings.Join(found, "\n"))
			}
		})
	}
}
