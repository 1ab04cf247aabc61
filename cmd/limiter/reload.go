package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
)

// reloader loads the four configuration files and both token files again
// and swaps the results into the Limiter, the descriptor rules' user, the
// forward-auth rules' holder and the API's tokens. Everything is loaded and validated before anything is
// swapped, so a reload with any file that fails to load (a broken limit, a
// rule naming a limit the new files no longer have, a file in use now gone
// or blank, an unreadable or empty token file) leaves everything in use
// untouched; the limits are swapped
// in one step, so no request ever sees half of them. Buckets are not
// touched: a changed limit applies from the next decision. For that reason
// a reload may not change the algorithm of a name whose enum it keeps
// (configfile.ParseReload): the buckets under that enum hold the old
// algorithm's state.
type reloader struct {
	files   configFlags
	limiter *ratelimits.Limiter
	log     *slog.Logger
	// last is the load in use: a file whose content went into use then
	// and is now gone or blank fails the reload (configFlags.load).
	last *loadedConfig
	// setRules puts the descriptor rules in use. A nil setRules (no gRPC
	// service to hand them to) still has the file checked, so that a bad
	// file is found on the reload that brings it, not when the service
	// starts.
	setRules func(*descriptors.Rules)
	// setForwardAuth puts the forward-auth rules in use (nil: checked
	// only).
	setForwardAuth func(*forwardauth.Rules)
	// follow hands the limits whose box entries sync to the local layer,
	// with each configuration put in use (nil: no layer).
	follow func(*ratelimits.Config)
	// move hands the local layer, before a configuration is put in use,
	// the limits whose sync_rate it changes (nil: no layer).
	move func(running, next *ratelimits.Config)
	// onRedis says the buckets are on Redis, where a limit's keys are
	// named by its box: a reload that adds or removes a penalty starts
	// that limit's buckets afresh there, which is logged.
	onRedis bool
	// apiTokenFile and adminTokenFile are read into tokens on every
	// reload, so that a leaked token is revoked without a restart.
	apiTokenFile, adminTokenFile string
	tokens                       *bearer.Tokens

	mu        sync.Mutex // one reload at a time, so swaps happen in order
	seen      string     // the files' signature at the last load attempt
	successes prometheus.Counter
	failures  prometheus.Counter
	lastGood  prometheus.Gauge
	// lastOK is 1 while the last load attempt succeeded, 0 after one that
	// failed: the alert on a refused change holds while the files in
	// place still fail, where the failures counter moves once per attempt.
	lastOK prometheus.Gauge

	overridesByLimit *prometheus.GaugeVec
	// history is the last attempt and the load in use, for GET
	// /v1/admin/reload.
	history reloadStatus
}

func newReloader(f *serveFlags, loaded *loadedConfig, limiter *ratelimits.Limiter, tokens *bearer.Tokens, log *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{
		files:          f.configFlags,
		last:           loaded,
		apiTokenFile:   f.apiTokenFile,
		adminTokenFile: f.adminTokenFile,
		tokens:         tokens,
		limiter:        limiter,
		log:            log,
		successes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_config_reloads_total",
			Help: "Configuration reloads that loaded and replaced the running configuration.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_config_reload_failures_total",
			Help: "Configuration reloads that failed; the running configuration was kept.",
		}),
		lastGood: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "limiter_config_last_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load (startup included).",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "limiter_config_last_reload_successful",
			Help: "1 when the last attempt to load the configuration files succeeded, 0 while the files in place fail to load.",
		}),
		overridesByLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "limiter_overrides_loaded",
			Help: "Overrides in the running configuration, per limit name.",
		}, []string{"limit"}),
	}
	reg.MustRegister(r.successes, r.failures, r.lastGood, r.lastOK, r.overridesByLimit)
	r.seen = r.signature()
	r.loaded(limiter.Config())
	if loaded != nil {
		r.history.succeeded(time.Now(), "startup", loaded)
	}
	return r
}

// loaded records a configuration that just went into use.
func (r *reloader) loaded(cfg *ratelimits.Config) {
	r.lastGood.SetToCurrentTime()
	r.lastOK.Set(1)
	r.overridesByLimit.Reset()
	for _, n := range cfg.Names() {
		r.overridesByLimit.WithLabelValues(n.Limit).Set(float64(cfg.OverrideCount(n.Name)))
	}
}

// Reload loads the files and, if they are all valid, puts them in use.
// trigger says in the log what asked for it. The error lists every problem.
func (r *reloader) Reload(trigger string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = r.signature()
	loaded, err := r.files.load(r.limiter.Config(), r.last)
	api, apiErr := readTokenFileOnReload(r.apiTokenFile)
	admin, adminErr := readTokenFileOnReload(r.adminTokenFile)
	if err == nil && apiErr == nil && adminErr == nil {
		// Both token files were read when serving started, and a token
		// file read without error holds a token, so neither set changes
		// from empty to not or back: Replace cannot refuse.
		err = r.tokens.Replace(api, admin)
	}
	if err := errors.Join(err, apiErr, adminErr); err != nil {
		r.failures.Inc()
		r.lastOK.Set(0)
		r.history.failed(time.Now(), trigger, err)
		for _, line := range problemLines(err) {
			r.log.Error("reload failed; keeping the running configuration and tokens", "trigger", trigger, "problem", line)
		}
		return err
	}
	// The rules are handed over before the limits they name: the two swaps
	// are not one, so a request between them meets the new rules with the
	// old limits. One whose rule names a limit those lack is decided once
	// more by the gRPC service, on what is in use by then.
	// The forward-auth handler does the same for its rules.
	for role, skipped := range loaded.skipped {
		if skipped != "" {
			r.log.Warn("reload: a built-in rules file does not fit the limit files given and is not used", "trigger", trigger, "file", loaded.paths[role], "problem", skipped)
		}
	}
	if r.setRules != nil {
		r.setRules(loaded.rules)
	}
	if r.setForwardAuth != nil {
		r.setForwardAuth(loaded.fwd)
	}
	if r.onRedis {
		for _, limit := range boxChanges(r.limiter.Config(), loaded.cfg) {
			r.log.Warn("reload: a penalty was added to or removed from a limit; on Redis its buckets move to keys of the other form and start afresh once", "trigger", trigger, "limit", limit)
		}
	}
	if r.move != nil {
		r.move(r.limiter.Config(), loaded.cfg)
	}
	r.limiter.SetConfig(loaded.cfg)
	if r.follow != nil {
		r.follow(loaded.cfg)
	}
	r.last = loaded
	r.successes.Inc()
	r.loaded(loaded.cfg)
	r.history.succeeded(time.Now(), trigger, loaded)
	counts := loaded.counts()
	r.log.Info("configuration reloaded", "trigger", trigger, "defaults", loaded.paths[defaultsFile], "limits", counts[defaultsFile],
		"overrides", loaded.paths[overridesFile], "override_ids", counts[overridesFile],
		"descriptors", loaded.paths[descriptorsFile], "descriptor_rules", counts[descriptorsFile],
		"forward_auth", loaded.paths[forwardAuthFile], "forward_auth_rules", counts[forwardAuthFile], "api_tokens", len(api), "admin_tokens", len(admin))
	return nil
}

// adminReload is Reload for the admin endpoint.
func (r *reloader) adminReload() error { return r.Reload("admin endpoint") }

// watch reloads whenever a file's signature changes, checking every
// interval until ctx ends. Polling the paths (following symlinks) sees every
// way a file is replaced: an edit in place, a write-then-rename, and the
// symlink swap Kubernetes does for ConfigMaps, without a dependency on
// inotify or on which directory entry changed.
func (r *reloader) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		changed := r.signature() != r.seen
		r.mu.Unlock()
		if changed {
			_ = r.Reload("file change") // failures are logged and counted
		}
	}
}

// signature identifies the current contents of every file a reload reads.
func (r *reloader) signature() string {
	paths := r.files.paths()
	return signature(append(paths[:], r.apiTokenFile, r.adminTokenFile)...)
}

// signature identifies the current contents of the files without reading
// them: device, inode, size and modification time of what each path points
// to, or "missing".
func signature(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			b.WriteString("missing;")
			continue
		}
		var dev, ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			dev, ino = uint64(st.Dev), st.Ino
		}
		fmt.Fprintf(&b, "%d:%d:%d:%d;", dev, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// boxChanges lists the limits, kept by name and enum, to which next adds
// a penalty or from which it removes one, for ids limited in both: the
// bucket key of an id is named by whether its own limit (its override, or
// the default) has a penalty. A name without a default may have a penalty
// in some overrides and not in others, so that a name's box alone does
// not say which buckets move; an id unlimited before or after has no
// bucket that moves.
func boxChanges(running, next *ratelimits.Config) []string {
	var changed []string
	for _, n := range next.Names() {
		if was, ok := running.Lookup(n.Limit); ok && was.Name == n.Name && boxMoves(running, next, n.Name) {
			changed = append(changed, n.Limit)
		}
	}
	return changed
}

// boxMoves reports whether next adds a penalty to, or removes one from,
// the limit of some id of name limited by both running and next.
func boxMoves(running, next *ratelimits.Config, name ratelimits.Name) bool {
	if !running.HasBox(name) && !next.HasBox(name) {
		return false
	}
	moves := func(was, is ratelimits.Limit, ok bool) bool {
		return ok && was.HasBox() != is.HasBox()
	}
	was, wasOK := running.Default(name)
	is, isOK := next.Default(name)
	if moves(was, is, wasOK && isOK) {
		return true
	}
	for _, cfgs := range [][2]*ratelimits.Config{{running, next}, {next, running}} {
		for id, l := range cfgs[0].Overrides(name) {
			other, ok := cfgs[1].Limit(name, id)
			if moves(l, other, ok) {
				return true
			}
		}
	}
	return false
}
