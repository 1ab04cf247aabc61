#!/usr/bin/env bash
# Builds the limiter's container image from this checkout, offline:
#
#   ./scripts/image.sh [TAG]      # TAG, else $LIMITER_IMAGE, else limiter:dev
#
# It builds the static binary (CGO_ENABLED=0) with the version from
# `git describe --tags --always --dirty` stamped in (`limiter version`
# prints it), stages a build context in a temporary directory (the binary,
# the host's CA bundle, config/*.yaml and the Dockerfile) and runs
# `docker build` there. Nothing of the build is left in the tree.
#
# The Dockerfile starts FROM scratch, which needs no pull, and the build
# uses the classic builder (DOCKER_BUILDKIT=0): Debian's docker.io has no
# buildx, a newer docker CLI without buildx refuses BuildKit builds, and the
# classic builder builds this Dockerfile without a network. It prints a
# deprecation notice on newer CLIs, which is harmless.
#
# Rebuilding a tag leaves its previous image without a name; that image is
# removed, so that repeated builds leave no dangling images behind.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-${LIMITER_IMAGE:-limiter:dev}}
ca=${LIMITER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

if ! command -v docker >/dev/null; then
  echo "scripts/image.sh: docker is required (e.g. sudo apt-get install -y docker.io)" >&2
  exit 1
fi
if [ ! -s "$ca" ]; then
  echo "scripts/image.sh: no CA bundle at $ca (install ca-certificates, or set LIMITER_CA_BUNDLE)" >&2
  exit 1
fi

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)

ctx=$(mktemp -d "${TMPDIR:-/tmp}/limiter-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$ctx/limiter" ./cmd/limiter
cp "$ca" "$ctx/ca-certificates.crt"
mkdir "$ctx/config"
cp config/*.yaml "$ctx/config/"
cp Dockerfile "$ctx/Dockerfile"
# Modes as the image should have them, whatever the checkout's umask:
# everything readable by the image's user, the binary executable.
chmod 0755 "$ctx/limiter" "$ctx/config"
chmod 0644 "$ctx/ca-certificates.crt" "$ctx/config/"*.yaml "$ctx/Dockerfile"

previous=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)

DOCKER_BUILDKIT=0 docker build --quiet --force-rm --build-arg "VERSION=$version" -t "$tag" "$ctx" >/dev/null

current=$(docker image inspect -f '{{.Id}}' "$tag")
if [ -n "$previous" ] && [ "$previous" != "$current" ] &&
  [ -z "$(docker image inspect -f '{{join .RepoTags ""}}' "$previous" 2>/dev/null)" ]; then
  # Only the untagged leftover; one still used by a container stays.
  docker image rm "$previous" >/dev/null 2>&1 || true
fi

size=$(docker image inspect -f '{{.Size}}' "$tag")
echo "scripts/image.sh: built $tag ($current, version $version, $((size / 1024 / 1024)) MiB)"
