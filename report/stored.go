package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/zlockcheck/zlockcheck/models"
)

// StoredRun describes a stored run directory (one holding history.jsonl) for CheckRun,
// so that its report can be written again: what its results.json says of the run (its
// test, recipe, seed, model, duration, ...). A directory without results.json (a run
// that stopped before its check) is described by its config.json if any, with
// fallback's model. The model's Timeout is always fallback's.
func StoredRun(dir string, fallback models.Config) (Run, models.Config, error) {
	run := Run{Dir: dir, History: filepath.Join(dir, "history.jsonl")}
	if _, err := os.Stat(run.History); err != nil {
		return run, fallback, fmt.Errorf("%s is not a run directory: %w", dir, err)
	}
	cfg := fallback
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	switch {
	case err == nil:
		var r Results
		if err := json.Unmarshal(data, &r); err != nil {
			return run, cfg, fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
		}
		run.Test, run.RunID, run.Recipe, run.Seed = r.Test, r.RunID, r.Recipe, r.Seed
		run.Config, run.Interrupted, run.ZooKeeperVersion = r.Config, r.Interrupted, r.ZooKeeperVersion
		run.RecipeVersion = r.RecipeVersion
		run.SetupError, run.Baseline = r.SetupError, r.Baseline
		run.Elapsed = time.Duration(r.ElapsedSeconds * float64(time.Second))
		if r.Model != "" {
			cfg.Kind, cfg.Permits = r.Model, r.Permits
		}
		return run, cfg, nil
	case !errors.Is(err, fs.ErrNotExist):
		return run, cfg, err
	}
	data, err = os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return run, cfg, nil
	}
	if err != nil {
		return run, cfg, err
	}
	var c struct {
		RunID  string `json:"run_id"`
		Name   string `json:"name"`
		Recipe string `json:"recipe"`
		Seed   int64  `json:"seed"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return run, cfg, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	var whole any
	_ = json.Unmarshal(data, &whole) // it parsed above
	run.Test, run.RunID, run.Recipe, run.Seed, run.Config = c.Name, c.RunID, c.Recipe, c.Seed, whole
	return run, cfg, nil
}
