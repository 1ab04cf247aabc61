// Package image tests the limiter's container image with a real Docker
// daemon: the image scripts/image.sh builds (limiter:dev, or the tag in
// LIMITER_IMAGE) run as containers on the host's network, listening on
// loopback ports. Its tests are behind the build tag image, so that go test
// ./... needs no Docker; scripts/test.sh builds the image and runs them:
//
//	./scripts/image.sh && go test -tags image -count=1 ./test/image/
package image
