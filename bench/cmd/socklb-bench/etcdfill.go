package main

// The filler objects are written into etcd, under the keys and in the
// encoding kube-apiserver stores them with, instead of through the API
// server: kube-apiserver v1.37's ClusterIP allocator counts the IPAddress
// objects of its range after every allocation, for a metric
// (ipallocator.(*Allocator).Used, called twice per Service create), so
// creating the n-th Service costs O(n) and 100 000 of them take hours on
// two CPUs (profile: 79 % of the API server's CPU in Used at 12 000). The
// dataplanes still see every object the way they would in a cluster: the
// API server's watch cache reads etcd, and their LIST and WATCH go through
// it. The target and probe Services, the probe's changes and the churn go
// through the API server as before.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fillerVIPBase: fillers take ClusterIPs from 10.104.0.0/13, the upper half
// of serviceCIDR, so that the API server's own random picks (kubernetes,
// target, probe) rarely land there; filler IPs equal to one of those are
// skipped, and the IPAddress objects written with the fillers keep the API
// server from handing their IPs out later.
var fillerVIPBase = netip.MustParseAddr("10.104.0.0")

// etcd's default --max-txn-ops is 128: three objects per filler.
const fillersPerTxn = 42

type etcdKV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// fillerVIP is the ClusterIP of filler i: the (i+1)-th address after
// fillerVIPBase that is not in taken (sorted offsets from fillerVIPBase).
func fillerVIP(i int, taken []uint32) netip.Addr {
	off := uint32(i + 1)
	for _, t := range taken {
		if t <= off {
			off++
		}
	}
	b := fillerVIPBase.As4()
	u := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) + off
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}

// takenOffsets are the offsets from fillerVIPBase of the ClusterIPs the
// API server handed out itself, sorted.
func takenOffsets(vips ...string) []uint32 {
	b := fillerVIPBase.As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	var out []uint32
	for _, s := range vips {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			continue
		}
		x := a.As4()
		if u := uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3]); u > base {
			out = append(out, u-base)
		}
	}
	slices.Sort(out)
	return out
}

// fillerKVs are filler i's Service, EndpointSlice and IPAddress as etcd
// holds them (JSON, which the API server's storage decoder reads as well as
// protobuf; it applies defaults on read).
func fillerKVs(i int, vip netip.Addr, now metav1.Time, sh shape) ([]etcdKV, error) {
	name := fmt.Sprintf("fill-%d", i)
	svc := service(name, sh.servicePorts(i)...)
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	svc.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i))
	svc.CreationTimestamp = now
	single := corev1.IPFamilyPolicySingleStack
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = vip.String(), []string{vip.String()}
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	svc.Spec.SessionAffinity, svc.Spec.InternalTrafficPolicy = corev1.ServiceAffinityNone, &cluster
	if sh.nodePort(i) {
		svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster
	}

	ips := make([]string, endpointsPerService)
	for j := range ips {
		ips[j] = fillerIP(i, j)
	}
	sl := slice(name, name, sh.endpointPorts(), ips...)
	sl.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
	sl.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i+1))
	sl.CreationTimestamp = now

	ipa := &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{Name: vip.String(), CreationTimestamp: now, Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
			networkingv1.LabelManagedBy:       "ipallocator.k8s.io",
		}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: benchNS, Name: name}},
	}
	var kvs []etcdKV
	for _, o := range []struct {
		key string
		obj any
	}{
		{"/registry/services/specs/" + benchNS + "/" + name, svc},
		{"/registry/endpointslices/" + benchNS + "/" + name, sl},
		{"/registry/ipaddresses/" + vip.String(), ipa},
	} {
		b, err := json.Marshal(o.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.key, err)
		}
		kvs = append(kvs, etcdKV{Key: o.key, Value: string(b)})
	}
	return kvs, nil
}

// etcdPut writes kvs in one transaction through etcd's JSON gateway (no
// etcd client library in the module for a benchmark's setup).
func etcdPut(ctx context.Context, url string, kvs []etcdKV) error {
	type put struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type op struct {
		RequestPut put `json:"requestPut"`
	}
	var req struct {
		Success []op `json:"success"`
	}
	for _, kv := range kvs {
		req.Success = append(req.Success, op{put{
			Key:   base64.StdEncoding.EncodeToString([]byte(kv.Key)),
			Value: base64.StdEncoding.EncodeToString([]byte(kv.Value)),
		}})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/txn", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd txn: %s: %s", resp.Status, bytes.TrimSpace(out))
	}
	var r struct {
		Succeeded bool `json:"succeeded"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.Succeeded {
		return fmt.Errorf("etcd txn not applied: %s", bytes.TrimSpace(out))
	}
	return nil
}

// growEtcd writes fillers [from, want) into etcd, then waits until the API
// server lists them all.
func (o *objects) growEtcd(ctx context.Context, from, want int) error {
	taken := takenOffsets(o.targetVIP, o.probeVIP)
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	err := inParallel(ctx, 4, from, want, fillersPerTxn, func(lo, hi int) error {
		var kvs []etcdKV
		for i := lo; i < hi; i++ {
			k, err := fillerKVs(i, fillerVIP(i, taken), now, o.shape)
			if err != nil {
				return err
			}
			kvs = append(kvs, k...)
		}
		if err := etcdPut(ctx, o.etcd, kvs); err != nil {
			return fmt.Errorf("fillers %d-%d: %w", lo, hi-1, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return o.waitListed(ctx, want+2)
}

// waitListed waits until the API server lists n Services and n
// EndpointSlices in the bench namespace.
func (o *objects) waitListed(ctx context.Context, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		svcs, err := o.c.CoreV1().Services(benchNS).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		sls, err := o.c.DiscoveryV1().EndpointSlices(benchNS).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		count := func(l metav1.ListMeta, items int) int {
			if l.RemainingItemCount != nil {
				return items + int(*l.RemainingItemCount)
			}
			return items
		}
		gotS, gotE := count(svcs.ListMeta, len(svcs.Items)), count(sls.ListMeta, len(sls.Items))
		if gotS >= n && gotE >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server lists %d Services and %d EndpointSlices of %d written", gotS, gotE, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
