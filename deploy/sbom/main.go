// Command sbom writes a CycloneDX 1.5 software bill of materials (JSON)
// for a Go binary, from the module list the Go toolchain embeds in every
// binary (what `go version -m` prints): the main module, each dependency
// module with its version and go.sum hash, and the Go toolchain. Used by
// deploy/release.sh for each release archive.
//
//	go run ./deploy/sbom -date 2026-12-01T00:00:00Z dist/n8n-guard_linux_amd64/n8n-guard > n8n-guard.cdx.json
//
// The output depends only on the binary and -date, so the same build gives
// the same SBOM.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type bom struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	SerialNumber string       `json:"serialNumber"`
	Version      int          `json:"version"`
	Metadata     metadata     `json:"metadata"`
	Components   []component  `json:"components"`
	Dependencies []dependency `json:"dependencies"`
}

type metadata struct {
	Timestamp string    `json:"timestamp,omitempty"`
	Tools     tools     `json:"tools"`
	Component component `json:"component"`
}

type tools struct {
	Components []component `json:"components"`
}

type component struct {
	Type       string     `json:"type"`
	BOMRef     string     `json:"bom-ref,omitempty"`
	Name       string     `json:"name"`
	Version    string     `json:"version,omitempty"`
	PURL       string     `json:"purl,omitempty"`
	Hashes     []hash     `json:"hashes,omitempty"`
	Properties []property `json:"properties,omitempty"`
}

type hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

func main() {
	date := flag.String("date", "", "metadata timestamp (RFC 3339), e.g. the commit date")
	version := flag.String("version", "", "version of the main component (default: the binary's module version)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sbom [-date RFC3339] [-version v] <go binary>")
		os.Exit(2)
	}
	if err := write(os.Stdout, flag.Arg(0), *date, *version); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func write(w io.Writer, path, date, version string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(bin)
	if version == "" {
		version = bi.Main.Version
	}
	mainRef := purl(bi.Main.Path, version)
	settings := []property{{Name: "go:toolchain", Value: bi.GoVersion}}
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-ldflags":
			settings = append(settings, property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	b := bom{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		// A UUID derived from the binary: the same binary, the same serial.
		SerialNumber: "urn:uuid:" + uuidOf(sum[:]),
		Metadata: metadata{
			Timestamp: date,
			Tools:     tools{Components: []component{{Type: "application", Name: "n8n-guard deploy/sbom"}}},
			Component: component{
				Type: "application", BOMRef: mainRef, Name: bi.Main.Path, Version: version, PURL: mainRef,
				Hashes:     []hash{{Alg: "SHA-256", Content: hex.EncodeToString(sum[:])}},
				Properties: settings,
			},
		},
		Components:   []component{},
		Dependencies: []dependency{},
	}
	deps := dependency{Ref: mainRef, DependsOn: []string{}}
	std := component{Type: "library", BOMRef: "pkg:golang/std@" + bi.GoVersion, Name: "std", Version: bi.GoVersion,
		PURL: "pkg:golang/std@" + bi.GoVersion}
	b.Components = append(b.Components, std)
	deps.DependsOn = append(deps.DependsOn, std.BOMRef)
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		c := component{Type: "library", BOMRef: purl(m.Path, m.Version), Name: m.Path, Version: m.Version, PURL: purl(m.Path, m.Version)}
		if m.Sum != "" {
			c.Properties = []property{{Name: "go:sum", Value: m.Sum}}
		}
		b.Components = append(b.Components, c)
		deps.DependsOn = append(deps.DependsOn, c.BOMRef)
	}
	b.Dependencies = append(b.Dependencies, deps)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(b)
}

// purl is the package URL of a Go module (purl spec, type golang).
func purl(path, version string) string {
	p := "pkg:golang/" + strings.ToLower(path)
	if version != "" {
		p += "@" + version
	}
	return p
}

func uuidOf(b []byte) string {
	u := make([]byte, 16)
	copy(u, b)
	u[6] = u[6]&0x0f | 0x50 // version 5 style (name-based)
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
