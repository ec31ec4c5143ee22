package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// capacityTable is the capacity case of #22: whether socklb's default maps
// took every Service, as its own metrics say after the full sync.
func capacityTable(w *strings.Builder, cs []Capacity) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "### Capacity case (#22: fits the default maps)\n\n")
	fmt.Fprintf(w, "N Services of %d endpoints, the fillers with %d ports and every tenth a NodePort, the Node with %d NodePort addresses; socklb alone, with its default map sizes. "+
		"Frontends and slots (endpoints of every frontend) as asked for and as programmed, Services refused, and each map's entries over capacity, from socklb's own metrics once every frontend asked for was programmed or some refused; "+
		"then %d connects through the target's NodePort at each Node address.\n\n", cs[0].EndpointsPerService, cs[0].Ports, len(cs[0].NodeAddresses), cs[0].NodePortTries)
	fmt.Fprintf(w, "| N | NodePort Services | frontends programmed / asked | slots programmed / asked | Services refused | fits | full sync (s) | maps (MiB) | agent RSS (MiB, peak) | NodePort answers per address |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n")
	for _, c := range cs {
		fits := "yes"
		if c.RefusedServices > 0 || c.FrontendsProgrammed < c.Frontends || c.SlotsProgrammed < c.Slots || c.Note != "" {
			fits = "**no**"
		}
		var answers []string
		for _, a := range c.NodeAddresses {
			answers = append(answers, fmt.Sprintf("%s: %d/%d", a, c.NodePortAnswers[a], c.NodePortTries))
		}
		fmt.Fprintf(w, "| %d | %d | %d / %d | %d / %d | %d | %s | %s | %s | %s (%s) | %s |\n", c.NServices, c.NodePortServices,
			c.FrontendsProgrammed, c.Frontends, c.SlotsProgrammed, c.Slots, c.RefusedServices, fits,
			formatPtr(c.FullSyncS), formatPtr(c.MapMiB), formatPtr(c.AgentRSSMiB), formatPtr(c.AgentPeakRSSMiB), strings.Join(answers, ", "))
		if c.Note != "" {
			fmt.Fprintf(w, "\nNote: %s\n", c.Note)
		}
	}
	fmt.Fprintf(w, "\nMap pressure (entries ÷ capacity, `socklb_bpf_map_pressure`):\n\n")
	for _, c := range cs {
		names := slices.Sorted(maps.Keys(c.MapPressure))
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.3f", n, c.MapPressure[n]))
		}
		fmt.Fprintf(w, "- N=%d: %s\n", c.NServices, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}

func formatPtr(f *float64) string {
	if f == nil {
		return "–"
	}
	return format(*f)
}
