#!/usr/bin/env bash
# Build Go binaries once per version and keep them in a per-user cache, so a fresh
# clone of the repository copies them instead of rebuilding.
#   hack/cached-go-install.sh NAME[,NAME...] VERSION DEST_DIR -- BUILD COMMAND...
# The build command must leave each binary at "$GOBIN/NAME"; several names let one
# build command (one `go build` of many packages) fill the cache in one go.
set -euo pipefail
names=$1 version=$2 dest=$3; shift 4
IFS=, read -r -a names <<<"$names"
cache="$("$(dirname "$0")/cache-dir.sh")/bin/$version"
mkdir -p "$cache" "$dest"
# One build per binary at a time: two checkouts building the same one would share $GOBIN.
exec 9>"$cache/.lock-${names[0]}"
flock 9
missing=0
for n in "${names[@]}"; do [[ -x "$cache/$n" ]] || missing=1; done
if (( missing )); then
  echo ">> building ${names[*]} $version (cached in $cache)" >&2
  export GOBIN="$cache/.build-${names[0]}" GOTOOLCHAIN=local CGO_ENABLED=0
  rm -rf "$GOBIN"; mkdir -p "$GOBIN"
  "$@"
  for n in "${names[@]}"; do mv "$GOBIN/$n" "$cache/$n"; done
  rm -rf "$GOBIN"
fi
for n in "${names[@]}"; do install -m 0755 "$cache/$n" "$dest/$n"; done
