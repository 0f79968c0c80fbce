// Command genhistory writes a synthetic mutex history (JSON Lines) for the checker
// benchmarks in bench/run.sh: valid, or with planted double grants, with crashed ops.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
)

func main() {
	var cfg models.GenConfig
	flag.IntVar(&cfg.Ops, "ops", 100000, "history lines")
	flag.IntVar(&cfg.Processes, "procs", 50, "concurrent processes")
	flag.Float64Var(&cfg.CrashRate, "crash", 0.05, "share of ops that crash (info)")
	flag.IntVar(&cfg.DoubleGrants, "double-grants", 0, "planted double grants (0: valid history)")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed")
	out := flag.String("out", "", "output file")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "genhistory: -out is required")
		os.Exit(2)
	}
	if err := write(*out, models.GenerateMutexHistory(cfg)); err != nil {
		fmt.Fprintln(os.Stderr, "genhistory:", err)
		os.Exit(1)
	}
}

func write(path string, h histories.History) error {
	w, err := histories.NewWriter(path)
	if err != nil {
		return err
	}
	for _, op := range h {
		if _, err := w.Append(op); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
