#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a cache
# directory keyed by version, once: later runs find the binaries and exit.
#   k8s/hack/build-apiserver.sh [cache-dir]
# The cache directory defaults to $HERALD_K8S_CACHE, then
# ${XDG_CACHE_HOME:-$HOME/.cache}/herald/k8s-v$KUBE_VERSION-etcd-v$ETCD_VERSION.
set -euo pipefail
KUBE_VERSION=${KUBE_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
dir=${1:-${HERALD_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/herald/k8s-v$KUBE_VERSION-etcd-v$ETCD_VERSION}}
if [[ -x $dir/kube-apiserver && -x $dir/etcd ]]; then echo "$dir"; exit 0; fi
mkdir -p "$dir"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# etcd: a three-line main around etcdmain.Main.
mkdir -p "$work/etcd"
cat >"$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(cd "$work/etcd" && go mod init herald.local/etcd >/dev/null 2>&1 &&
	go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null 2>&1 &&
	go mod tidy >/dev/null 2>&1 && CGO_ENABLED=0 go build -o "$dir/etcd.tmp" . && mv "$dir/etcd.tmp" "$dir/etcd") >&2

# kube-apiserver: k8s.io/kubernetes with every staging module replaced by its
# published version.
mkdir -p "$work/kube"
staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming"
{
	echo "module herald.local/kube"
	echo
	echo "go 1.26.0"
	echo
	echo "require k8s.io/kubernetes v$KUBE_VERSION"
	echo
	for m in $staging; do echo "replace k8s.io/$m => k8s.io/$m v$STAGING_VERSION"; done
} >"$work/kube/go.mod"
cat >"$work/kube/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
(cd "$work/kube" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
	cd "$work/kube" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver &&
	mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver") >&2
echo "$dir"
