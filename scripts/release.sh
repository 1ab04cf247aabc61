#!/usr/bin/env bash
# Release binaries: limiter for linux and darwin on amd64 and arm64, each a
# static binary (CGO_ENABLED=0) stamped with its version, in a tarball with
# LICENSE and README.md, and SHA256SUMS over the tarballs.
#
#   scripts/release.sh [OUTDIR]          # default dist/ (ignored by git)
#
# VERSION sets the version (default: git describe, so a tag v1.2.3 gives
# v1.2.3, and a later commit v1.2.3-4-gabc1234); RELEASE_TARGETS the
# os/arch pairs (default: all four). Tarballs are laid out the same on
# every run (sorted names, fixed owners and times), so that one commit
# built twice gives the same checksums.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
out=${1:-dist}
targets=${RELEASE_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
# The commit's time, not now: the tarballs' file times.
stamp=$(git log -1 --format=%cI 2>/dev/null || echo 2026-01-01T00:00:00Z)

mkdir -p "$out"
tarballs=()
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  name="limiter_${version}_${os}_${arch}"
  stage="$out/$name"
  rm -rf "$stage"
  mkdir -p "$stage"
  echo "==> $name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$stage/limiter" ./cmd/limiter
  cp LICENSE README.md "$stage/"
  tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$stamp" \
    -cf - "$name" | gzip -n > "$out/$name.tar.gz"
  rm -rf "$stage"
  tarballs+=("$name.tar.gz")
done
(cd "$out" && sha256sum "${tarballs[@]}" > SHA256SUMS)
echo "==> $out/SHA256SUMS"
cat "$out/SHA256SUMS"
