// Command wiresize prints what one Service and one EndpointSlice weigh on
// the wire to a watcher, in protobuf (what socklb's informers ask for) and
// JSON: as socklb-bench writes them, and as a cluster's own writers make
// them (kubectl apply's Service, the EndpointSlice controller's slice,
// with their managedFields, owner reference and per-endpoint Pod
// reference, which socklb drops only once they have arrived). docs/scale.md
// multiplies these by the nodes and the changes; -out keeps the figures.
//
//	go run ./bench/cmd/wiresize -out bench/results/wiresize.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/socklb/socklb/internal/testkit"
)

// sized is one object's encodings.
type sized struct {
	What     string `json:"what"`
	Protobuf int    `json:"protobuf_bytes"`
	JSON     int    `json:"json_bytes"`
}

type protoObject interface {
	Size() int
}

func measure(what string, o protoObject) sized {
	j, err := json.Marshal(o)
	if err != nil {
		log.Fatalf("%s: %v", what, err)
	}
	return sized{What: what, Protobuf: o.Size(), JSON: len(j)}
}

func main() {
	out := flag.String("out", "", "write the figures as JSON here too")
	flag.Parse()
	figures := []sized{
		measure("Service, as socklb-bench writes its fillers (ClusterIP, one TCP port)", benchService()),
		measure("EndpointSlice of 10 endpoints, as socklb-bench writes its fillers", benchSlice(10)),
		measure("Service, as kubectl apply leaves it (labels, selector, last-applied annotation, managedFields)", clusterService()),
		measure("EndpointSlice of 10 endpoints, as the EndpointSlice controller writes it", clusterSlice(10)),
		measure("EndpointSlice of 100 endpoints (the controller's default maximum), as it writes it", clusterSlice(100)),
	}
	for _, f := range figures {
		fmt.Printf("%6d B protobuf %6d B JSON  %s\n", f.Protobuf, f.JSON, f.What)
	}
	if *out != "" {
		b, _ := json.MarshalIndent(figures, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

var created = metav1.Unix(1764633600, 0)

func uid(i int) types.UID { return types.UID(fmt.Sprintf("6f1c2a9e-8d4b-4c3e-9a7f-%012d", i)) }

func benchService() *corev1.Service {
	svc := testkit.Service("socklb-bench/fill-12345", "", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	single, cluster := corev1.IPFamilyPolicySingleStack, corev1.ServiceInternalTrafficPolicyCluster
	svc.UID, svc.CreationTimestamp, svc.ResourceVersion = uid(1), created, "123456789"
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.48.57", []string{"10.96.48.57"}
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	svc.Spec.SessionAffinity, svc.Spec.InternalTrafficPolicy = corev1.ServiceAffinityNone, &cluster
	return svc
}

func benchSlice(n int) *discoveryv1.EndpointSlice {
	sl := testkit.EndpointSlice("socklb-bench/fill-12345", "fill-12345", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{testkit.EndpointPort("", corev1.ProtocolTCP, 8080)})
	sl.Labels[discoveryv1.LabelManagedBy] = "socklb-bench"
	sl.UID, sl.CreationTimestamp, sl.ResourceVersion = uid(2), created, "123456790"
	for j := 0; j < n; j++ {
		sl.Endpoints = append(sl.Endpoints, testkit.OnNode("node-1", testkit.ReadyEndpoint(fmt.Sprintf("10.%d.%d.%d", 128+j/65536, j/256%256, j%256))))
	}
	return sl
}

func clusterService() *corev1.Service {
	svc := benchService()
	svc.Namespace, svc.Name = "shop", "checkout-api"
	svc.Labels = map[string]string{"app.kubernetes.io/name": "checkout-api", "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/managed-by": "Helm"}
	svc.Spec.Selector = map[string]string{"app.kubernetes.io/name": "checkout-api", "app.kubernetes.io/instance": "shop"}
	svc.Spec.Ports[0].Name = "http"
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"labels":{"app.kubernetes.io/managed-by":"Helm","app.kubernetes.io/name":"checkout-api","app.kubernetes.io/part-of":"shop"},"name":"checkout-api","namespace":"shop"},"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}],"selector":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/name":"checkout-api"}}}` + "\n"}
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{}}},"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`)},
	}}
	return svc
}

func clusterSlice(n int) *discoveryv1.EndpointSlice {
	sl := benchSlice(0)
	sl.Namespace, sl.Name, sl.GenerateName = "shop", "checkout-api-7xk2p", "checkout-api-"
	sl.Labels = map[string]string{discoveryv1.LabelServiceName: "checkout-api", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		"app.kubernetes.io/name": "checkout-api", "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/managed-by": "Helm"}
	sl.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-12-02T10:15:42Z"}
	yes := true
	sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "checkout-api", UID: uid(1), Controller: &yes, BlockOwnerDeletion: &yes}}
	sl.Ports[0].Name = ptr("http")
	sl.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "discovery.k8s.io/v1", Time: &created, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"6f1c2a9e-8d4b-4c3e-9a7f-000000000001\"}":{}}},"f:ports":{}}`)},
	}}
	for j := 0; j < n; j++ {
		e := testkit.OnNode(fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", j/256%256, j%256), testkit.ReadyEndpoint(fmt.Sprintf("10.%d.%d.%d", 128+j/65536, j/256%256, j%256)))
		e.Zone = ptr("eu-west-1" + string(rune('a'+j%3)))
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("checkout-api-6d8f9c7b5-%05d", j), UID: uid(1000 + j)}
		sl.Endpoints = append(sl.Endpoints, e)
	}
	return sl
}

func ptr[T any](v T) *T { return &v }
