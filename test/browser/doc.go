// Package browser tests the operator's page (/ui/) in a real headless
// Chromium driven by chromedp: denials made over HTTP show on the page,
// the lookup shows a bucket, a wrong admin token is refused in plain
// words. Its tests are behind the build tag browser, so that go test
// ./... needs no browser; scripts/test.sh runs them:
//
//	go test -tags browser -count=1 ./test/browser/
//
// With LIMITER_UI_SCREENSHOTS=DIR they also save the page as PNGs at two
// widths into DIR (docs/ holds the ones operations.md shows).
package browser
