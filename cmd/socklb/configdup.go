package main

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// duplicateKey finds a key given twice in one mapping of a YAML document,
// which YAML-to-JSON conversion would otherwise resolve silently (the last
// one wins) before the strict decoder could see it. It names the key by
// its path and both lines.
func duplicateKey(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	return duplicateIn(&doc, nil)
}

func duplicateIn(n *yaml.Node, path []string) error {
	if n.Kind == yaml.MappingNode {
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Value == "<<" { // a merge key's values may be overridden
				continue
			}
			name := strings.Join(append(path[:len(path):len(path)], k.Value), ".")
			if line, dup := first[k.Value]; dup {
				return fmt.Errorf("line %d: %q is given twice (first at line %d): keep one", k.Line, name, line)
			}
			first[k.Value] = k.Line
			if err := duplicateIn(n.Content[i+1], append(path[:len(path):len(path)], k.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range n.Content {
		if err := duplicateIn(c, path); err != nil {
			return err
		}
	}
	return nil
}
