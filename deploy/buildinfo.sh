# Sourced by deploy/release.sh and deploy/container/build.sh: the version,
# commit and date a build stamps into the binary (`n8n-guard version`,
# /healthz), and the Go flags of a release build. Override any of VERSION,
# COMMIT, DATE from the environment.
#
# VERSION: the tag on HEAD (v1.2.0), else `v0.0.0-snapshot.<commit>`;
# +dirty when the checkout has uncommitted changes.
# DATE: the commit's date (UTC), not the build's: the same commit builds
# the same bytes (with -trimpath and no VCS stamping by the toolchain).
: "${COMMIT:=$(git rev-parse HEAD)}"
if [ -z "${VERSION:-}" ]; then
  VERSION=$(git describe --tags --match 'v[0-9]*' --exact-match 2>/dev/null || echo "v0.0.0-snapshot.$(git rev-parse --short=12 HEAD)")
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then VERSION="$VERSION+dirty"; fi
fi
: "${DATE:=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)}"
LDFLAGS="-s -w -X main.buildVersion=$VERSION -X main.buildCommit=$COMMIT -X main.buildDate=$DATE"
export VERSION COMMIT DATE LDFLAGS CGO_ENABLED=0
GOFLAGS_RELEASE="-trimpath -buildvcs=false"
