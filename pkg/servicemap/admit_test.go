package servicemap

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestAdmit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func(ns, name string, age int, fes, bes int) Demand {
		return Demand{Service: types.NamespacedName{Namespace: ns, Name: name}, Created: t0.Add(time.Duration(age) * time.Hour), Frontends: fes, Backends: bes}
	}
	protected := func(x Demand) Demand { x.Protected = true; return x }
	cases := []struct {
		name    string
		demands []Demand
		room    Capacity
		want    []string
	}{
		{
			name:    "everything fits: nothing refused",
			demands: []Demand{d("a", "one", 0, 2, 4), d("b", "two", 1, 1, 1)},
			room:    Capacity{Frontends: 3, Backends: 5, Ranges: 1},
		},
		{
			name:    "the newest Service is refused, whole",
			demands: []Demand{d("t", "big", 2, 2, 4), d("a", "old", 0, 1, 3)},
			room:    Capacity{Frontends: 3, Backends: 5, Ranges: 1},
			want:    []string{"t/big"},
		},
		{
			name:    "an older Service too big for what is left is refused; a younger small one still fits",
			demands: []Demand{d("a", "small-old", 0, 1, 1), d("t", "huge", 1, 100, 1000), d("b", "small-new", 2, 1, 1)},
			room:    Capacity{Frontends: 10, Backends: 10, Ranges: 1},
			want:    []string{"t/huge"},
		},
		{
			name:    "protected Services come first whatever their age",
			demands: []Demand{d("t", "tenant", 0, 1, 4), protected(d("kube-system", "kube-dns", 5, 2, 2))},
			room:    Capacity{Frontends: 3, Backends: 4, Ranges: 1},
			want:    []string{"t/tenant"},
		},
		{
			name:    "protected Services are never refused, even when they alone do not fit",
			demands: []Demand{protected(d("default", "kubernetes", 0, 1, 9)), d("t", "tenant", 0, 1, 1)},
			room:    Capacity{Frontends: 3, Backends: 4, Ranges: 1},
			want:    []string{"t/tenant"},
		},
		{
			name:    "source ranges count",
			demands: []Demand{{Service: types.NamespacedName{Namespace: "a", Name: "lb"}, Frontends: 1, Ranges: 3}, d("a", "plain", 1, 1, 1)},
			room:    Capacity{Frontends: 3, Backends: 4, Ranges: 2},
			want:    []string{"a/lb"},
		},
		{
			name:    "same creation time: namespace/name decides",
			demands: []Demand{d("b", "x", 0, 1, 1), d("a", "y", 0, 1, 1), d("a", "x", 0, 1, 1)},
			room:    Capacity{Frontends: 2, Backends: 2, Ranges: 1},
			want:    []string{"b/x"},
		},
		{
			name:    "frontends alone can refuse",
			demands: []Demand{d("a", "one", 0, 2, 0), d("a", "two", 1, 2, 0)},
			room:    Capacity{Frontends: 3, Backends: 100, Ranges: 1},
			want:    []string{"a/two"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, r := range Admit(c.demands, c.room) {
				got = append(got, r.Service.String())
			}
			if len(got) != len(c.want) {
				t.Fatalf("refused %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("refused %v, want %v", got, c.want)
				}
			}
		})
	}
}
