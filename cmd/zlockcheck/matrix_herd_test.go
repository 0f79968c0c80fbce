package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// TestMatrixHerdColumn: matrix.md's herd column shows each recipe's herd verdict and
// reads per grant from its run without faults, whatever its other runs said.
func TestMatrixHerdColumn(t *testing.T) {
	dir := t.TempDir()
	classes := nemesis.Setups()[:2] // none, server
	cells := []matrixCell{
		{Recipe: "zlc-mutex", Fault: "server", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.NotExercised}},
		{Recipe: "zlc-mutex", Fault: "none", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.NoHerd, ReadsPerGrant: 4.46}},
		{Recipe: "mutant-herd", Fault: "none", Verdict: models.Valid, Herd: &herd.Report{Verdict: herd.Herd, ReadsPerGrant: 15.5}},
		{Recipe: "gozk", Fault: "none", Verdict: models.Valid},
	}
	var o runOptions
	if err := writeMatrix(dir, []matrixRow{{Recipe: "zlc-mutex"}, {Recipe: "mutant-herd"}, {Recipe: "gozk"}}, classes, cells, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	for _, want := range []string{"| recipe | none | server | herd |", "| no herd, 4.5 reads/grant |\n", "| herd, 15.5 reads/grant |\n", "| gozk | valid, 0 ops |  |  |\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("matrix.md lacks %q:\n%s", want, md)
		}
	}
}
