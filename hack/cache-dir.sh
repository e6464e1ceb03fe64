#!/bin/sh
# The per-user build cache shared by every clone (Go binaries per version, images, the real
# node's containerd store): the one place this rule is written. Prints the directory.
# The Makefile, hack/cached-go-install.sh and tfhelm_dev/localcluster.py all ask this script.
echo "${TFHELM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tfhelm}"
