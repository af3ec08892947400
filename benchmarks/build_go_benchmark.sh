#!/usr/bin/env bash
# Builds etcd's Go `benchmark` tool (tools/benchmark) offline from Debian's packages, for
# `python -m benchmarks.ladder --go-benchmark PATH` and `python -m benchmarks.efficiency --go-benchmark PATH`.
#
#   benchmarks/build_go_benchmark.sh OUTPUT [ETCD_GIT]
#
# Debian ships etcd's server and client sources (golang-etcd-server-dev) and every Go dependency as golang-*-dev
# packages, but not tools/benchmark: its few files come from etcd's git history at the tag of the Debian package
# (ETCD_GIT: a local clone or mirror of etcd's repository, default https://github.com/etcd-io/etcd.git). The build
# runs in GOPATH mode against /usr/share/gocode, so no Go module is downloaded. Prints the binary's path.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 OUTPUT [ETCD_GIT]" >&2
  exit 2
fi
output=$(realpath -m "$1")
etcd_git=${2:-https://github.com/etcd-io/etcd.git}

packages=(golang-go golang-etcd-server-dev golang-gopkg-cheggaaa-pb.v1-dev golang-github-spf13-cobra-dev
  golang-golang-x-time-dev golang-github-bgentry-speakeasy-dev golang-github-dustin-go-humanize-dev git)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: install first (as root): apt-get install ${missing[*]}" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

# the tag of the sources Debian ships: 3.4.23-4 -> v3.4.23
version=$(dpkg-query -W -f='${Version}' golang-etcd-server-dev)
tag="v${version%%-*}"
tag="${tag#*:}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gopath="$work/gopath"
mkdir -p "$gopath/src/go.etcd.io"
# every Debian Go source but etcd's, linked; etcd's copied, so that tools/benchmark can join it
for entry in /usr/share/gocode/src/*; do
  [[ $(basename "$entry") == go.etcd.io ]] || ln -s "$entry" "$gopath/src/"
done
for entry in /usr/share/gocode/src/go.etcd.io/*; do
  [[ $(basename "$entry") == etcd ]] || ln -s "$entry" "$gopath/src/go.etcd.io/"
done
cp -r /usr/share/gocode/src/go.etcd.io/etcd "$gopath/src/go.etcd.io/etcd"

if [[ -d "$etcd_git" ]]; then
  git_dir=$etcd_git
  [[ -d "$etcd_git/.git" ]] && git_dir="$etcd_git/.git"
  git --git-dir="$git_dir" archive "$tag" tools/benchmark | tar -x -C "$gopath/src/go.etcd.io/etcd"
else
  git clone -q --depth 1 --branch "$tag" "$etcd_git" "$work/etcd"
  cp -r "$work/etcd/tools" "$gopath/src/go.etcd.io/etcd/"
fi

mkdir -p "$(dirname "$output")"
(cd "$gopath/src/go.etcd.io/etcd/tools/benchmark" &&
  GO111MODULE=off GOPATH="$gopath" GOCACHE="$work/cache" go build -o "$output" .)
echo "$output"
