#!/usr/bin/env bash
# Builds the release archives of n8n-guard: linux, darwin, windows x amd64,
# arm64; one archive each (tar.gz, zip for windows) with the binary (the
# version, commit and date stamped in: deploy/buildinfo.sh), README,
# CHANGELOG, every doc the README links and the docs' images (docs/img),
# the importable workflows, the monitoring pack, the compose and Kubernetes
# files and the container recipe (deploy/compose, deploy/kubernetes,
# deploy/container; Dockerfile.multistage builds from a checkout), and the
# systemd unit on linux; a
# CycloneDX SBOM per binary (deploy/sbom); checksums.txt (sha256) over all.
#
#   deploy/release.sh --snapshot     # any checkout: v0.0.0-snapshot.<commit>; what CI runs
#   deploy/release.sh                # a clean checkout of a tag v*: the real release
#   OUT=/tmp/dist deploy/release.sh --snapshot
#   TARGETS="linux/amd64" deploy/release.sh --snapshot
#   deploy/release.sh --list         # the files each archive holds beside the binary
#
# Archives are reproducible: same commit, same Go, same bytes (commit date
# as mtime, sorted entries, numeric owner 0, -trimpath).
set -euo pipefail
cd "$(dirname "$0")/.."
# Beside the binary, at the same paths as in the repository (the README's
# links work in the unpacked archive).
files() {
  printf '%s\n' README.md CHANGELOG.md docs/*.md docs/openapi.yaml docs/img/* workflows/*.json workflows/templates/*.json \
    deploy/monitoring/alerts.yml deploy/monitoring/alerts_test.yml \
    deploy/monitoring/grafana-dashboard.json deploy/monitoring/podmonitor.yaml \
    deploy/compose/compose.yaml deploy/compose/compose.n8n-2.yaml deploy/compose/n8n-guard.yaml deploy/compose/.env.example \
    deploy/kubernetes/*.yaml deploy/kubernetes/n8n/*.yaml deploy/kubernetes/n8n/n8n-2.x/kustomization.yaml \
    deploy/container/Dockerfile deploy/container/Dockerfile.multistage deploy/container/build.sh
}
if [ "${1:-}" = "--list" ]; then files; echo "n8n-guard.service (linux)"; exit 0; fi
snapshot=false
if [ "${1:-}" = "--snapshot" ]; then snapshot=true; fi
if ! $snapshot; then
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then echo "release: uncommitted changes (use --snapshot)" >&2; exit 1; fi
  if ! VERSION=$(git describe --tags --match 'v[0-9]*' --exact-match 2>/dev/null); then
    echo "release: HEAD has no v* tag (tag it, or use --snapshot)" >&2; exit 1
  fi
  export VERSION
fi
. deploy/buildinfo.sh
out=${OUT:-dist}
targets=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
rm -rf "$out"
mkdir -p "$out"
sbomtool="$out/.sbom"
go build -o "$sbomtool" ./deploy/sbom
echo "n8n-guard $VERSION ($COMMIT, $DATE)"
for t in $targets; do
  goos=${t%/*} goarch=${t#*/}
  name="n8n-guard_${VERSION#v}_${goos}_${goarch}"
  stage="$out/.stage/$name"
  mkdir -p "$stage"
  exe=n8n-guard
  if [ "$goos" = windows ]; then exe=n8n-guard.exe; fi
  GOOS=$goos GOARCH=$goarch go build $GOFLAGS_RELEASE -ldflags "$LDFLAGS" -o "$stage/$exe" ./cmd/n8n-guard
  for f in $(files); do
    mkdir -p "$stage/$(dirname "$f")" && cp "$f" "$stage/$f"
  done
  if [ "$goos" = linux ]; then cp deploy/systemd/n8n-guard.service "$stage/"; fi
  "$sbomtool" -date "$DATE" -version "$VERSION" "$stage/$exe" > "$out/$name.cdx.json"
  find "$stage" -exec touch -h -d "$DATE" {} +
  if [ "$goos" = windows ]; then
    (cd "$out/.stage" && find "$name" -print | LC_ALL=C sort | zip -q -X -@ "../$name.zip")
  else
    tar -C "$out/.stage" --sort=name --mtime="$DATE" --owner=0 --group=0 --numeric-owner \
      -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
  fi
  echo "  $name"
done
rm -rf "$out/.stage" "$sbomtool"
(cd "$out" && sha256sum -- *.tar.gz *.zip *.cdx.json 2>/dev/null | LC_ALL=C sort -k2 > checksums.txt)
echo "$out/checksums.txt:"
cat "$out/checksums.txt"
