package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
)

// testAdminToken is written where the admin token Secret is mounted.
const testAdminToken = "deploy-test-admin-token"

// TestStartWithManifestSettings starts the binary with the limiter
// container's command and environment from each kustomization, as the pod
// would, changed only so that it runs here: both listeners on loopback
// ports the kernel picks, the mounted files under a temporary directory
// (the ConfigMap's data, a test token for the Secret), and a Redis URL sent
// to a closed port. It then asks the probes' paths, gRPC health and the
// admin endpoint, and stops it with SIGTERM as the kubelet does.
func TestStartWithManifestSettings(t *testing.T) {
	bin := limiterBinary(t)
	renders := renderAll(t)
	for _, dir := range kustomizations[1:] {
		r := renders[dir]
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			startAsPod(t, bin, r)
		})
	}
}

func startAsPod(t *testing.T, bin string, r *rendering) {
	v := r.view()
	dep := v.deployments[limiterName]
	if dep == nil {
		t.Fatal("no Deployment limiter")
	}
	var c corev1.Container
	for _, x := range dep.Spec.Template.Spec.Containers {
		if x.Name == limiterName {
			c = x
		}
	}
	root := t.TempDir()

	// The volumes, as the kubelet would mount them.
	var mounts []string
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(root, filepath.FromSlash(m.MountPath))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, m.MountPath)
		for _, vol := range dep.Spec.Template.Spec.Volumes {
			if vol.Name != m.Name {
				continue
			}
			files := map[string]string{}
			switch {
			case vol.ConfigMap != nil:
				cm := v.configMaps[vol.ConfigMap.Name]
				if cm == nil {
					t.Fatalf("ConfigMap %s is not in the manifests", vol.ConfigMap.Name)
				}
				for k, d := range cm.Data {
					files[k] = d
				}
				if len(vol.ConfigMap.Items) > 0 {
					files = map[string]string{}
					for _, it := range vol.ConfigMap.Items {
						files[it.Path] = cm.Data[it.Key]
					}
				}
			case vol.Secret != nil:
				for _, it := range vol.Secret.Items {
					files[it.Path] = testAdminToken + "\n"
				}
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// The environment: the manifest's, moved here.
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LIMITER_") {
			env = append(env, kv)
		}
	}
	onRedis := false
	for _, e := range c.Env {
		val := e.Value
		if e.ValueFrom != nil {
			val = "deploy-test-secret-value"
		}
		switch e.Name {
		case "LIMITER_LISTEN", "LIMITER_GRPC_LISTEN":
			val = "127.0.0.1:0"
		case "LIMITER_SOURCE":
			if u, err := url.Parse(val); err == nil && u.Host != "" {
				// Port 1 on loopback: refused at once, so the start
				// waits only for its ping's timeout.
				u.Host = "127.0.0.1:1"
				val = u.String()
				onRedis = true
			}
		}
		for _, m := range mounts {
			if strings.HasPrefix(val, m+"/") {
				val = filepath.Join(root, filepath.FromSlash(val))
			}
		}
		env = append(env, e.Name+"="+val)
	}

	if len(c.Command) == 0 {
		t.Fatal("no command")
	}
	cmd := exec.Command(bin, append(append([]string{}, c.Command[1:]...), c.Args...)...)
	cmd.Dir = root // no relative path may resolve to the repository's files
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logMu sync.Mutex
	var logs []string
	addrs := make(chan [2]string, 1)
	go func() {
		var httpAddr, grpcAddr string
		sent := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			logs = append(logs, sc.Text())
			logMu.Unlock()
			var line struct{ Msg, Server, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "listening" {
				continue
			}
			if line.Server == "grpc" {
				grpcAddr = line.Addr
			} else {
				httpAddr = line.Addr
			}
			if httpAddr != "" && grpcAddr != "" && !sent {
				addrs <- [2]string{httpAddr, grpcAddr}
				sent = true
			}
		}
		io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	dump := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Join(logs, "\n")
	}
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()

	var httpAddr, grpcAddr string
	select {
	case a := <-addrs:
		httpAddr, grpcAddr = a[0], a[1]
	case err := <-exited:
		stopped = true
		t.Fatalf("the limiter exited (%v) before listening:\n%s", err, dump())
	case <-time.After(10 * time.Second):
		t.Fatalf("the limiter did not log both listeners within 10 s:\n%s", dump())
	}

	// The probes, on the paths the manifest gives them.
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(p string) int {
		resp, err := client.Get("http://" + httpAddr + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	wantReady, wantHealth := http.StatusOK, healthpb.HealthCheckResponse_SERVING
	if onRedis {
		wantReady, wantHealth = http.StatusServiceUnavailable, healthpb.HealthCheckResponse_NOT_SERVING
	}
	if got := get(c.LivenessProbe.HTTPGet.Path); got != http.StatusOK {
		t.Errorf("liveness GET %s: %d, want 200", c.LivenessProbe.HTTPGet.Path, got)
	}
	if got := get(c.ReadinessProbe.HTTPGet.Path); got != wantReady {
		t.Errorf("readiness GET %s: %d, want %d", c.ReadinessProbe.HTTPGet.Path, got, wantReady)
	}

	// gRPC health on the gRPC listener, as a gRPC load balancer would ask.
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	cancel()
	conn.Close()
	if err != nil {
		t.Errorf("gRPC health: %v", err)
	} else if hc.Status != wantHealth {
		t.Errorf("gRPC health %v, want %v", hc.Status, wantHealth)
	}

	// The admin token file is in force: a reload needs its token, and
	// reloads the mounted files.
	post := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/admin/reload", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST /v1/admin/reload: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := post(""); code != http.StatusUnauthorized {
		t.Errorf("reload without a token: %d %s, want 401", code, body)
	}
	if code, body := post(testAdminToken); code != http.StatusOK || !strings.Contains(body, `"reloaded":true`) {
		t.Errorf("reload with the admin token: %d %s, want 200 reloaded", code, body)
	}

	// SIGTERM, as the kubelet sends after the preStop hook: a clean exit,
	// well within the grace period.
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(*dep.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0:\n%s", err, dump())
		}
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(grace):
		t.Errorf("still running %v after SIGTERM:\n%s", grace, dump())
	}
	if t.Failed() {
		t.Logf("log:\n%s", dump())
	}
}
