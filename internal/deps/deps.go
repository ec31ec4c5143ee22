package deps
import (
 _ "github.com/cilium/ebpf"
 _ "github.com/cilium/ebpf/link"
 _ "github.com/cilium/ebpf/cmd/bpf2go"
 _ "k8s.io/client-go/kubernetes"
 _ "k8s.io/client-go/informers"
 _ "k8s.io/api/core/v1"
 _ "k8s.io/apimachinery/pkg/util/yaml"
 _ "github.com/vishvananda/netlink"
 _ "github.com/vishvananda/netns"
 _ "golang.org/x/sys/unix"
 _ "github.com/fsnotify/fsnotify"
 _ "github.com/prometheus/client_golang/prometheus"
)
