#!/bin/sh
# osdeps.sh TARGET: the OS commands `make TARGET` runs, checked before any
# long step, so a fresh machine learns what it lacks in a second instead of
# after the tool builds. As root on Debian the missing packages are
# installed (apt-get); anywhere else the script stops, naming them and the
# command that installs them.
set -eu
target=${1:?usage: osdeps.sh demo|test}

# command:package. demo: the netns lab. test: the lab, the integration
# tests (bpftool reads the pinned maps), the multi-node lab (sysctl,
# nsenter), and the benchmark smoke run beside kube-proxy (iptables,
# nftables, socat, taskset).
case $target in
demo) need="ip:iproute2 nsenter:util-linux" ;;
test) need="ip:iproute2 nsenter:util-linux taskset:util-linux sysctl:procps bpftool:bpftool iptables:iptables iptables-save:iptables nft:nftables socat:socat git:git" ;;
*) echo "osdeps.sh: unknown target $target (demo or test)" >&2; exit 2 ;;
esac

# A user's PATH may lack the sbin directories where these live.
has() {
	command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]
}

missing() {
	out=""
	for pair in $need; do
		has "${pair%%:*}" && continue
		case " $out " in *" ${pair#*:} "*) ;; *) out="$out ${pair#*:}" ;; esac
	done
	echo "$out"
}

pkgs=$(missing)
[ -z "$pkgs" ] && exit 0

if [ "$(id -u)" = 0 ] && [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
	echo "make $target: installing$pkgs (apt-get install -y$pkgs)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -qq $pkgs >/dev/null
	pkgs=$(missing)
	[ -z "$pkgs" ] && exit 0
	echo "make $target: still missing after apt-get:$pkgs" >&2
	exit 1
fi
echo "make $target needs$pkgs; install them first (as root: apt-get install$pkgs)" >&2
exit 1
