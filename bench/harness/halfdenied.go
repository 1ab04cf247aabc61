package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// benchOverLimit is the limit of the half-denied rows' other half: one
// spend a day per id, so that once the harness has spent each of its
// 10,000 ids ("over-N") every later spend is denied. The half-denied rows
// measure what denials cost (the top denied ids' sketch counts each one)
// against the same rows of a baseline build.
const (
	benchOverLimit    = "BenchOverLimit"
	benchOverLimitDef = `
BenchOverLimit:
  enum: 2000000005
  id: string
  burst: 1
  count: 1
  period: 24h
`
	overLimitIDs = 10_000
)

// halfDeniedCall is the open loop's request of a half-denied row: even
// requests spend limit for a "key-N" id, odd ones the over-limit limit
// for an "over-N" id, which is denied.
func halfDeniedCall(limit, denied string) call {
	return func(i int) (string, string) {
		if i%2 == 1 {
			return "/v1/spend", fmt.Sprintf(`{"limit":%q,"id":"over-%d","cost":1}`, denied, i%overLimitIDs+1)
		}
		return "/v1/spend", fmt.Sprintf(`{"limit":%q,"id":"key-%d","cost":1}`, limit, i+1)
	}
}

// exhaust spends every "over-N" id of s's denied limit once, so that from
// the first measured request on, each of them is denied.
func (s *server) exhaust(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ids := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ids {
				// A loaded machine can time a spend out (503): it is
				// tried again, a few times, before the run is given up.
				err := s.spendOnce(ctx, n)
				for try := 1; err != nil && try < 5 && ctx.Err() == nil; try++ {
					err = s.spendOnce(ctx, n)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	go func() {
		defer close(ids)
		for n := 1; n <= overLimitIDs; n++ {
			select {
			case ids <- n:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("%s: spending the over-limit ids: %w", s.name, err)
	default:
		return ctx.Err()
	}
}

func (s *server) spendOnce(ctx context.Context, n int) error {
	body := fmt.Sprintf(`{"limit":%q,"id":"over-%d","cost":1}`, s.deniedLimit, n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/spend", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
