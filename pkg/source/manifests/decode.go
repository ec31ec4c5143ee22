package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/yaml"
)

// Objects are the usable objects of one file, in file order.
type Objects struct {
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Nodes    []*corev1.Node
}

// Len is the number of objects.
func (o Objects) Len() int { return len(o.Services) + len(o.Slices) + len(o.Nodes) }

// DocError is a problem with one document (or one List item) of a file.
type DocError struct {
	Doc   int  // 1-based index among the file's non-blank documents
	Line  int  // 1-based line where the document starts
	Item  int  // index in the document's List items, -1 outside a List
	Fatal bool // the document could not be read, so the file is not usable
	Err   error
}

func (e DocError) Error() string {
	s := fmt.Sprintf("document %d (starting at line %d)", e.Doc, e.Line)
	if e.Item >= 0 {
		s += fmt.Sprintf(", items[%d]", e.Item)
	}
	// One line per problem: YAML errors come as indented lists.
	return s + ": " + newlines.ReplaceAllString(e.Err.Error(), " ")
}

var newlines = regexp.MustCompile(`\s*\n\s*`)

func (e DocError) Unwrap() error { return e.Err }

// Fatal reports whether any of errs makes its file unusable.
func Fatal(errs []DocError) bool {
	for _, e := range errs {
		if e.Fatal {
			return true
		}
	}
	return false
}

// deserializer knows only the groups we read, so a typo in apiVersion fails
// loudly instead of decoding into some other type. Strict mode turns unknown
// and duplicate fields into errors we can report while still using the
// object: a misspelt "targetport" silently ignored costs hours.
var deserializer = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(discoveryv1.AddToScheme(s))
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

var (
	serviceKind    = corev1.SchemeGroupVersion.WithKind("Service")
	nodeKind       = corev1.SchemeGroupVersion.WithKind("Node")
	sliceKind      = discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	genericList    = corev1.SchemeGroupVersion.WithKind("List")
	serviceList    = corev1.SchemeGroupVersion.WithKind("ServiceList")
	nodeList       = corev1.SchemeGroupVersion.WithKind("NodeList")
	sliceList      = discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList")
	supportedKinds = map[schema.GroupVersionKind]bool{
		serviceKind: true, nodeKind: true, sliceKind: true,
		genericList: true, serviceList: true, nodeList: true, sliceList: true,
	}
)

var errNoName = errors.New("metadata.name is empty; object ignored")

// Decode reads one file's contents. It never panics and never stops at the
// first bad document: the caller gets every usable object and every
// problem, and decides with Fatal whether to trust the file.
func Decode(data []byte) (Objects, []DocError) {
	var d decoding
	for _, doc := range splitDocuments(data) {
		d.doc = doc
		d.document(doc.body)
	}
	return d.objs, d.errs
}

// decoding accumulates the results of one Decode call.
type decoding struct {
	objs Objects
	errs []DocError
	doc  document // the document being decoded, for error positions
}

func (d *decoding) problem(item int, fatal bool, err error) {
	d.errs = append(d.errs, DocError{Doc: d.doc.index, Line: d.doc.line, Item: item, Fatal: fatal, Err: err})
}

func (d *decoding) document(body []byte) {
	js, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		// Retry leniently: a duplicate key is worth a warning (the last value
		// wins, as with kubectl), not losing the document.
		var lenientErr error
		if js, lenientErr = yaml.YAMLToJSON(body); lenientErr != nil {
			d.problem(-1, true, fmt.Errorf("parsing YAML: %w", lenientErr))
			return
		}
		d.problem(-1, false, fmt.Errorf("%w (the last value is used)", err))
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return // empty or comments only
	}
	d.object(js, -1)
}

// object decodes one JSON object; item is its index in a List, or -1.
func (d *decoding) object(js []byte, item int) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		d.problem(item, true, fmt.Errorf("not a Kubernetes object: %w", err))
		return
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		d.problem(item, true, fmt.Errorf("kind or apiVersion missing (kind %q, apiVersion %q)", tm.Kind, tm.APIVersion))
		return
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if !supportedKinds[gvk] {
		d.problem(item, false, fmt.Errorf("kind %s (apiVersion %s) ignored: only Service and Node (v1), EndpointSlice (discovery.k8s.io/v1) and lists of them are read", tm.Kind, tm.APIVersion))
		return
	}
	obj, _, err := deserializer.Decode(js, nil, nil)
	switch {
	case err != nil && runtime.IsStrictDecodingError(err):
		d.problem(item, false, fmt.Errorf("%s: %w (ignored)", tm.Kind, err))
	case err != nil:
		d.problem(item, true, fmt.Errorf("decoding %s: %w", tm.Kind, err))
		return
	}
	d.add(obj, item)
}

// add keeps obj, or expands it when it is a list.
func (d *decoding) add(obj runtime.Object, item int) {
	switch o := obj.(type) {
	case *corev1.Service:
		d.service(o, item)
	case *discoveryv1.EndpointSlice:
		d.slice(o, item)
	case *corev1.Node:
		d.node(o, item)
	case *corev1.List:
		if item >= 0 {
			d.problem(item, false, errors.New("a List inside a List is ignored"))
			return
		}
		for i, raw := range o.Items {
			d.object(raw.Raw, i)
		}
	case *corev1.ServiceList:
		for i := range o.Items {
			d.service(&o.Items[i], i)
		}
	case *discoveryv1.EndpointSliceList:
		for i := range o.Items {
			d.slice(&o.Items[i], i)
		}
	case *corev1.NodeList:
		for i := range o.Items {
			d.node(&o.Items[i], i)
		}
	}
}

func (d *decoding) service(s *corev1.Service, item int) {
	if s.Name == "" {
		d.problem(item, false, fmt.Errorf("Service: %w", errNoName))
		return
	}
	if s.Namespace == "" {
		s.Namespace = metav1.NamespaceDefault
	}
	d.objs.Services = append(d.objs.Services, s)
}

func (d *decoding) slice(s *discoveryv1.EndpointSlice, item int) {
	if s.Name == "" {
		d.problem(item, false, fmt.Errorf("EndpointSlice: %w", errNoName))
		return
	}
	if s.Namespace == "" {
		s.Namespace = metav1.NamespaceDefault
	}
	d.objs.Slices = append(d.objs.Slices, s)
}

func (d *decoding) node(n *corev1.Node, item int) {
	if n.Name == "" {
		d.problem(item, false, fmt.Errorf("Node: %w", errNoName))
		return
	}
	d.objs.Nodes = append(d.objs.Nodes, n)
}
