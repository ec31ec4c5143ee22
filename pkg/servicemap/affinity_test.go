package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestBuildSessionAffinity(t *testing.T) {
	clientIP := corev1.ServiceAffinityClientIP
	runBuildCases(t, []buildCase{
		{
			name:     "affinity default timeout: ClientIP without sessionAffinityConfig is 10800 s",
			services: []*corev1.Service{withAffinity(web(), clientIP, nil)},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] affinity=3h0m0s"},
		},
		{
			name: "affinity default timeout: a config without clientIP, or without timeoutSeconds, is the default too",
			services: []*corev1.Service{
				func() *corev1.Service {
					s := withAffinity(svc("default/a", "10.96.0.11", sport("", tcp, 80)), clientIP, nil)
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
					return s
				}(),
				func() *corev1.Service {
					s := withAffinity(svc("default/b", "10.96.0.12", sport("", tcp, 80)), clientIP, nil)
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{}}
					return s
				}(),
			},
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/a: -> [] affinity=3h0m0s",
				"10.96.0.12:80/TCP ClusterIP default/b: -> [] affinity=3h0m0s",
			},
		},
		{
			name:     "ClientIP with timeoutSeconds",
			services: []*corev1.Service{withAffinity(web(), clientIP, ptr(int32(60)))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080] affinity=1m0s"},
		},
		{
			name:     "the largest timeout the API allows, one day",
			services: []*corev1.Service{withAffinity(web(), clientIP, ptr(int32(86400)))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] affinity=24h0m0s"},
		},
		{
			name:     "None: no affinity, whatever sessionAffinityConfig says",
			services: []*corev1.Service{withAffinity(web(), corev1.ServiceAffinityNone, ptr(int32(60)))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name: "timeoutSeconds out of range is a problem and the default is used",
			services: []*corev1.Service{
				withAffinity(svc("default/a", "10.96.0.11", sport("", tcp, 80)), clientIP, ptr(int32(0))),
				withAffinity(svc("default/b", "10.96.0.12", sport("", tcp, 80)), clientIP, ptr(int32(86401))),
			},
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/a: -> [] affinity=3h0m0s",
				"10.96.0.12:80/TCP ClusterIP default/b: -> [] affinity=3h0m0s",
			},
			problems: []string{
				`Service default/a: spec.sessionAffinityConfig.clientIP.timeoutSeconds 0 is not 1-86400`,
				`Service default/b: spec.sessionAffinityConfig.clientIP.timeoutSeconds 86401 is not 1-86400`,
			},
		},
		{
			name:     "unknown sessionAffinity is a problem and no affinity is applied",
			services: []*corev1.Service{withAffinity(web(), "Cookie", nil)},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`spec.sessionAffinity "Cookie" is not None or ClientIP`},
		},
		{
			name: "affinity applies to every frontend of the Service",
			services: []*corev1.Service{withAffinity(withIngress(withExternalIPs(nodePortSvc(), "192.0.2.10"),
				ingress("203.0.113.7", nil)), clientIP, ptr(int32(30)))},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> [] affinity=30s",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [] affinity=30s",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [] affinity=30s",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [] affinity=30s",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] affinity=30s",
			},
		},
		{
			name:     "affinity with a PolicyDrop frontend",
			services: []*corev1.Service{withITP(withAffinity(web(), clientIP, nil), policyLocal)},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, on("node-b", ready("10.0.0.2")))},
			nodes:    nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] affinity=3h0m0s drop"},
		},
	})
}
