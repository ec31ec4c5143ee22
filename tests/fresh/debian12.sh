#!/bin/bash
# The README's two commands on a fresh Debian 12 made by debootstrap, with
# only Go installed (and `apt-get install git make`, the README's first
# line): how #24 was checked. Run as root on a machine with debootstrap:
#
#   sh tests/fresh/debian12.sh /var/tmp/deb12 [commit]
#
# It makes the root once (debootstrap bookworm), copies this machine's Go
# toolchain to /usr/local/go in it, clones this repository at commit
# (HEAD) to /root/socklb with no cache of any kind, and runs `make demo`
# then `make test` there, in a private mount namespace (unshare -m) so
# every mount goes away with it. cgroups, bpffs and network namespaces
# are the host kernel's, as in a container.
set -euo pipefail
R=${1:?usage: debian12.sh DIR [commit]}
commit=${2:-HEAD}
repo=$(git rev-parse --show-toplevel)
if [ ! -x "$R/bin/bash" ]; then
	debootstrap bookworm "$R" http://deb.debian.org/debian
fi
rm -rf "$R/usr/local/go" "$R/root/socklb" "$R/root/.cache" "$R/root/go"
cp -a "$(go env GOROOT)" "$R/usr/local/go"
git clone -q "$repo" "$R/root/socklb"
git -C "$R/root/socklb" checkout -q "$(git rev-parse "$commit")"
exec unshare -m sh -c '
set -eu
R='"$R"'
mount --make-rprivate /
# ip netns needs / to be a mount point, as it is on a machine.
mount --bind $R $R
mount -t proc proc $R/proc
mount --rbind /sys $R/sys
mount --rbind /dev $R/dev
mount -t tmpfs tmpfs $R/run
mount -t tmpfs tmpfs $R/tmp
cp /etc/resolv.conf $R/etc/resolv.conf
# A machine behind a TLS-intercepting proxy trusts its CA: the
# environment, not a package.
cp /usr/local/share/ca-certificates/*.crt $R/usr/local/share/ca-certificates/ 2>/dev/null || true
chroot $R update-ca-certificates >/dev/null
chroot $R /usr/bin/env -i HOME=/root PATH=/usr/local/go/bin:/root/go/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 GOTOOLCHAIN=local /bin/bash -c "
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq make git >/dev/null
cd /root/socklb
git log --oneline -1
echo == make demo; date -u
time make demo
echo == make test; date -u
time make test
echo == done; date -u
"'
