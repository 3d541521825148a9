#!/usr/bin/env bash
# Builds the n8n-guard image from this checkout: a static binary with the
# version stamped in (deploy/buildinfo.sh), copied onto scratch by
# deploy/container/Dockerfile. No base image is pulled.
#
#   deploy/container/build.sh [tag]          # default n8n-guard:<version>
#   CONTAINER_ENGINE=podman deploy/container/build.sh n8n-guard:dev
#   GOARCH=arm64 deploy/container/build.sh n8n-guard:arm64   (and --platform with your engine)
set -euo pipefail
cd "$(dirname "$0")/../.."
. deploy/buildinfo.sh
engine=${CONTAINER_ENGINE:-$(command -v docker >/dev/null 2>&1 && echo docker || echo podman)}
tag=${1:-n8n-guard:${VERSION//+/-}}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
go build $GOFLAGS_RELEASE -ldflags "$LDFLAGS" -o "$ctx/n8n-guard" ./cmd/n8n-guard
mkdir -m 700 "$ctx/data"   # the guard wants its data folder private (it holds the token)
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -s "$ca" ]; then echo "no CA bundle at $ca (set CA_BUNDLE)" >&2; exit 1; fi
cp "$ca" "$ctx/ca-certificates.crt"
# podman writes OCI images by default, which have no HEALTHCHECK: ask for
# the Docker format (docker builds it anyway).
format=()
case "$(basename "$engine")" in podman*|buildah*) format=(--format docker) ;; esac
"$engine" build "${format[@]}" -f deploy/container/Dockerfile -t "$tag" \
  --build-arg VERSION="$VERSION" --build-arg REVISION="$COMMIT" --build-arg CREATED="$DATE" "$ctx"
echo "built $tag ($VERSION, $COMMIT)"
