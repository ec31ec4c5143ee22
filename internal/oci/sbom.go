package oci

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// SBOMPath is where socklb's image carries its SBOM: scanners that read an
// image's files (syft, trivy) find it there, and `crane export` shows it.
const SBOMPath = "/usr/share/sbom/socklb.spdx.json"

// Meta is what the image says about where it comes from: the
// org.opencontainers.image annotations and the SBOM's socklb package.
type Meta struct {
	Source, Version, Revision string
}

// Annotations are the OCI pre-defined annotation keys for m.
func (m Meta) Annotations() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.title":    "socklb",
	} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// SBOM is an SPDX 2.3 document of the Go binary bin: socklb itself and
// every module linked into it, read from the build information the Go
// linker embeds (debug/buildinfo), so it lists exactly what was compiled
// in, with the versions and go.sum hashes of that build. Its time is the
// epoch, as every other byte of the image, so the same commit gives the
// same document.
func SBOM(bin string, m Meta) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the Go build information of %s: %w", bin, err)
	}
	type ref struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		SPDXID         string `json:"SPDXID"`
		Name           string `json:"name"`
		Version        string `json:"versionInfo,omitempty"`
		Download       string `json:"downloadLocation"`
		FilesAnalyzed  bool   `json:"filesAnalyzed"`
		License        string `json:"licenseConcluded"`
		Copyright      string `json:"copyrightText"`
		Comment        string `json:"comment,omitempty"`
		ExternalRefs   []ref  `json:"externalRefs,omitempty"`
		PrimaryPurpose string `json:"primaryPackagePurpose,omitempty"`
		SourceInfo     string `json:"sourceInfo,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	version := m.Version
	if version == "" {
		version = bi.Main.Version
	}
	main := pkg{SPDXID: "SPDXRef-Package-socklb", Name: bi.Main.Path, Version: version, Download: "NOASSERTION",
		License: "NOASSERTION", Copyright: "NOASSERTION", PrimaryPurpose: "APPLICATION",
		ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", purl(bi.Main.Path, version)}}}
	if m.Source != "" && m.Revision != "" {
		main.Download = "git+" + m.Source + "@" + m.Revision
		main.SourceInfo = "built from commit " + m.Revision
	}
	doc := struct {
		Version      string `json:"spdxVersion"`
		DataLicense  string `json:"dataLicense"`
		SPDXID       string `json:"SPDXID"`
		Name         string `json:"name"`
		Namespace    string `json:"documentNamespace"`
		CreationInfo struct {
			Created  string   `json:"created"`
			Creators []string `json:"creators"`
		} `json:"creationInfo"`
		Packages      []pkg `json:"packages"`
		Relationships []rel `json:"relationships"`
	}{Version: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: "socklb-" + version,
		Namespace: fmt.Sprintf("https://github.com/socklb/socklb/spdx/%s-%s", version, m.Revision)}
	doc.CreationInfo.Created = "1970-01-01T00:00:00Z"
	doc.CreationInfo.Creators = []string{"Tool: socklb-image", "Organization: socklb"}
	doc.Packages = append(doc.Packages, main,
		pkg{SPDXID: "SPDXRef-Package-go", Name: "go", Version: strings.TrimPrefix(bi.GoVersion, "go"), Download: "https://go.dev/dl/",
			License: "NOASSERTION", Copyright: "NOASSERTION", Comment: "the Go toolchain and standard library compiled in",
			ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + bi.GoVersion}}})
	doc.Relationships = append(doc.Relationships, rel{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID},
		rel{main.SPDXID, "DEPENDS_ON", "SPDXRef-Package-go"})
	for i, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		p := pkg{SPDXID: fmt.Sprintf("SPDXRef-Package-%d-%s", i, spdxSafe(d.Path)), Name: d.Path, Version: d.Version,
			Download: "NOASSERTION", License: "NOASSERTION", Copyright: "NOASSERTION",
			ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", purl(d.Path, d.Version)}}}
		if d.Sum != "" {
			p.Comment = "go.sum " + d.Sum
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, rel{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	return json.MarshalIndent(doc, "", "  ")
}

// purl is a Go module's package URL (github.com/package-url/purl-spec).
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// spdxSafe makes a module path fit an SPDX id (letters, digits, '.', '-').
func spdxSafe(s string) string { return notIDChar.ReplaceAllString(s, "-") }
