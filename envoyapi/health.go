package envoyapi

import (
	"context"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probeInterval is how often the health probe asks the source whether it
// answers, and how long one probe may wait for it.
const probeInterval = 2 * time.Second

// startProbe probes the source once, then every probeInterval in the
// background until Shutdown. Only the first call starts it, and none after
// Shutdown has begun.
func (s *Server) startProbe() {
	s.mu.Lock()
	if s.probing || s.closing {
		s.mu.Unlock()
		return
	}
	s.probing = true
	s.mu.Unlock()
	state := s.probe(healthUnknown)
	go func() {
		defer close(s.probeDone)
		tick := time.NewTicker(probeInterval)
		defer tick.Stop()
		for {
			select {
			case <-s.probeCtx.Done():
				return
			case <-tick.C:
				state = s.probe(state)
			}
		}
	}()
}

// healthState is what the last probe found.
type healthState int8

const (
	healthUnknown healthState = iota // not probed yet
	healthServing
	healthNotServing
)

// probe asks the source whether it answers, sets the health of the
// service and the server from that, and returns what it found. A change
// from was is logged.
func (s *Server) probe(was healthState) healthState {
	ctx, cancel := context.WithTimeout(s.probeCtx, probeInterval)
	defer cancel()
	err := s.limiter.Ready(ctx)
	if err != nil && s.probeCtx.Err() != nil {
		return was // Shutdown ended the probe, not the source
	}
	now := healthServing
	if err != nil {
		now = healthNotServing
	}
	switch {
	case now == was:
	case now == healthServing:
		s.log.Info("source answers; health SERVING", "service", serviceName)
	default:
		s.log.Warn("source does not answer; health NOT_SERVING", "service", serviceName, "err", err)
	}
	s.setHealth(now == healthServing)
	return now
}

// setHealth sets the status of the server ("") and of the rate-limit
// service. After Shutdown has begun the health server ignores it.
func (s *Server) setHealth(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(serviceName, st)
}
