# Sourced by the scripts that copy files out of Go modules (hack/*-crds.sh): a version from
# mk/versions.mk, and a module's directory in Go's module cache (downloaded when missing).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GOTOOLCHAIN=local
v() { sed -n "s/^$1[[:space:]]*:=[[:space:]]*//p" "$repo/mk/versions.mk"; }
dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p'; }
