// Package jvm carries the build manifest of the Java workers' libraries fetched from
// Maven Central (pom.xml: one profile per library release) inside the zlockcheck
// binary. Package recipes fetches a profile's jars (internal/maven) and compiles a
// worker against them; `zlockcheck fetch` fetches them all.
package jvm

import (
	"context"
	_ "embed"

	"github.com/zlockcheck/zlockcheck/internal/maven"
)

//go:embed pom.xml
var pom []byte

// Manifest is pom.xml: the library releases the Java workers can run, one profile
// each (its id, e.g. "curator-5.9.0", is what recipes.Library.Maven names).
func Manifest() maven.Manifest { return maven.Manifest{Name: "jvm", POM: pom} }

// Fetch is the directory of profile's jars (DIR/lib/*.jar), fetched on first use.
func Fetch(ctx context.Context, cfg maven.Config, profile string) (string, error) {
	return maven.Fetch(ctx, cfg, Manifest(), profile)
}

// FetchAll fetches every profile (make setup): a run then downloads nothing.
func FetchAll(ctx context.Context, cfg maven.Config) error {
	ids, err := Manifest().Profiles()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := Fetch(ctx, cfg, id); err != nil {
			return err
		}
	}
	return nil
}
