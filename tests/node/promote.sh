#!/bin/sh
# promote.sh NEW OUT: the pair of runs in NEW (NEW/kube-proxy, NEW/socklb)
# replaces OUT/kube-proxy and OUT/socklb only when both completed (each
# wrote its JUnit report and the "complete" marker TestConformance writes
# last). Otherwise the committed results stay, and NEW is kept for a look.
set -eu
new=$1 out=$2
for p in kube-proxy socklb; do
	if [ ! -f "$new/$p/complete" ] || ! ls "$new/$p"/junit*.xml >/dev/null 2>&1; then
		echo "promote: $new/$p did not complete: $out keeps its results" >&2
		exit 1
	fi
done
# The JUnit reports are committed compressed (gzip -9n: no name, no time,
# so the same report gives the same bytes): 1.1 MB of XML each, most of it
# the specs outside the focus; tests/node/report reads them as they are.
for p in kube-proxy socklb; do
	gzip -9nf "$new/$p"/junit*.xml
done
rm -rf "$out/kube-proxy" "$out/socklb"
mv "$new/kube-proxy" "$out/kube-proxy"
mv "$new/socklb" "$out/socklb"
rmdir "$new"
echo "promote: $out/kube-proxy and $out/socklb are the pair of $new"
