package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

// go-redis's lines come out as records of the service's own format.
func TestRedisClientLogWritesRecords(t *testing.T) {
	var buf bytes.Buffer
	l := redisClientLog{slog.New(slog.NewJSONHandler(&buf, nil))}
	l.Printf(context.Background(), "redis: %s: failed to dial after %d attempts", "127.0.0.1:1", 5)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q: %v", buf.String(), err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "redis client" || rec["detail"] != "redis: 127.0.0.1:1: failed to dial after 5 attempts" {
		t.Errorf("record %v", rec)
	}
}
