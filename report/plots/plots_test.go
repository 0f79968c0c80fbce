package plots

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/zlockcheck/zlockcheck/histories"
)

func nemOp(f string, sec float64, value string) histories.Op {
	return histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: int64(sec * 1e9), Value: json.RawMessage(value)}
}

func TestFaultsPairStartAndStopByClass(t *testing.T) {
	h := histories.History{
		nemOp("start", 1, `{"fault":"partition","shape":"isolate-leader"}`),
		nemOp("start", 2, `{"fault":"kill","target":"leader"}`),
		nemOp("stop", 3, `{"fault":"partition","shape":"isolate-leader"}`),
		nemOp("stop", 3.5, `{"fault":"pause"}`), // never started: ignored
		nemOp("liveness", 4, `{"ok":true}`),
		nemOp("start", 5, `{"fault":"partition","error":"no leader"}`),
		{Type: histories.Invoke, F: "acquire", Process: histories.Client(0), Time: 8e9},
	}
	for i := range h {
		h[i].Index = int64(i)
	}
	got := Faults(h)
	want := []Fault{
		{Name: "partition", Label: "partition isolate-leader", Start: 1, Stop: 3, Stopped: true, StartIndex: 0, StopIndex: 2},
		{Name: "kill", Label: "kill leader (never stopped)", Start: 2, Stop: 8, StartIndex: 1, StopIndex: -1},
		{Name: "partition", Label: "partition (never stopped)", Start: 5, Stop: 8, StartIndex: 5, StopIndex: -1, Error: "no leader"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d faults %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fault %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// picture renders a chart of a fixture history and decodes its PNG; at maps data
// coordinates to pixels.
type picture struct {
	img image.Image
	p   *plot.Plot
	dc  draw.Canvas
}

func (pc picture) at(x, y float64) (int, int) {
	tx, ty := pc.p.Transforms(&pc.dc)
	toPx := func(l vg.Length) float64 { return float64(l) / 72 * dpi }
	return int(toPx(tx(x))), Height - int(toPx(ty(y)))
}

func (pc picture) bottom() int { return Height - int(float64(pc.dc.Min.Y)/72*dpi) }
func (pc picture) top() int    { return Height - int(float64(pc.dc.Max.Y)/72*dpi) }

// share is the share of pixels in the columns x0..x1 (between the data area's top and
// bottom, less a margin) for which keep is true.
func (pc picture) share(x0, x1 int, keep func(r, g, b uint32) bool) float64 {
	y0, y1 := pc.top()+30, pc.bottom()-5
	n, hit := 0, 0
	for x := x0; x <= x1; x++ {
		for y := y0; y <= y1; y++ {
			r, g, b, _ := pc.img.At(x, y).RGBA()
			n++
			if keep(r>>8, g>>8, b>>8) {
				hit++
			}
		}
	}
	return float64(hit) / float64(n)
}

func notWhite(r, g, b uint32) bool { return r < 250 || g < 250 || b < 250 }
func red(r, g, b uint32) bool      { return r > 180 && g < 70 && b < 70 }

func draws(t *testing.T, name string, build func(histories.History, Chart) (*plot.Plot, plot.Legend, error)) picture {
	t.Helper()
	h, _, err := histories.Load(filepath.Join("..", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c := Chart{Title: name}
	if name == "invalid" {
		c.Marks = []Mark{{Seconds: 11.116, Label: "first violation (key l0)"}}
	}
	p, leg, err := build(h, c)
	if err != nil {
		t.Fatal(err)
	}
	cv, dc := render(p, leg)
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: cv}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != Width || b.Dy() != Height {
		t.Fatalf("%dx%d, want %dx%d", b.Dx(), b.Dy(), Width, Height)
	}
	return picture{img: img, p: p, dc: dc}
}

func TestPicturesShadeFaultsAndMarkViolations(t *testing.T) {
	for _, pic := range []struct {
		name  string
		build func(histories.History, Chart) (*plot.Plot, plot.Legend, error)
	}{{"latency", latencyPlot}, {"rate", ratePlot}} {
		for _, fixture := range []string{"valid", "invalid"} {
			t.Run(pic.name+"/"+fixture, func(t *testing.T) {
				pc := draws(t, fixture, pic.build)
				y := pc.p.Y.Min
				col := func(sec float64) int { x, _ := pc.at(sec, y); return x }
				// The partition (5s to 9s) and the pause never stopped (13s to the end)
				// are shaded over their whole height; before the first fault the
				// background shows between the points.
				if s := pc.share(col(5.3), col(8.7), notWhite); s < 0.97 {
					t.Errorf("partition band: %.2f of its pixels shaded, want nearly all", s)
				}
				if s := pc.share(col(13.3), col(19.5), notWhite); s < 0.97 {
					t.Errorf("band of the pause never stopped: %.2f of its pixels shaded, want nearly all", s)
				}
				if s := pc.share(col(0.5), col(4.5), notWhite); s > 0.4 {
					t.Errorf("outside the faults %.2f of the pixels are not background, want few", s)
				}
				// The violation line at 11.116s is red from top to bottom, and nothing
				// else is red.
				line := pc.share(col(11.116)-1, col(11.116)+1, red)
				elsewhere := pc.share(col(0.2), col(10.9), red) + pc.share(col(16), col(19.8), red) // the line's label runs right of it
				if fixture == "invalid" && line < 0.25 {
					t.Errorf("violation line: %.2f of its columns red", line)
				}
				if fixture == "valid" && line > 0 {
					t.Errorf("a valid history has a violation line (%.2f red)", line)
				}
				if elsewhere > 0 {
					t.Errorf("red pixels away from the violation: %.3f", elsewhere)
				}
			})
		}
	}
}

func TestLatencyIsLogScaleWithInfoOnTop(t *testing.T) {
	pc := draws(t, "valid", latencyPlot)
	if _, ok := pc.p.Y.Scale.(plot.LogScale); !ok {
		t.Fatalf("y scale %T, want log", pc.p.Y.Scale)
	}
	ticks := pc.p.Y.Tick.Marker.Ticks(pc.p.Y.Min, pc.p.Y.Max)
	if last := ticks[len(ticks)-1]; last.Label != "unknown" || last.Value != pc.p.Y.Max {
		t.Errorf("top tick %+v, want \"unknown\" at %v", last, pc.p.Y.Max)
	}
	// The fixture's one info op completes at about 6.1s: an orange triangle on the top row.
	x, y := pc.at(6.13, pc.p.Y.Max)
	orange := 0
	for dx := -12; dx <= 12; dx++ {
		for dy := -8; dy <= 8; dy++ {
			r, g, b, _ := pc.img.At(x+dx, y+dy).RGBA()
			if r>>8 > 200 && g>>8 > 100 && g>>8 < 180 && b>>8 < 80 {
				orange++
			}
		}
	}
	if orange == 0 {
		t.Error("no orange info marker on the top row")
	}
}

func TestBinWidth(t *testing.T) {
	for _, c := range []struct{ end, want float64 }{{1, 0.1}, {20, 0.5}, {30, 0.5}, {300, 5}, {3600, 60}, {1e6, 12600}} {
		if got := binWidth(c.end); got != c.want {
			t.Errorf("binWidth(%v) = %v, want %v", c.end, got, c.want)
		}
	}
}

func TestPicturesOfEdgeHistories(t *testing.T) {
	zero := histories.History{
		{Type: histories.Invoke, F: "acquire", Process: histories.Client(0), Time: 0},
		{Type: histories.OK, F: "acquire", Process: histories.Client(0), Time: 0},
	}
	onlyInfo := histories.History{
		{Type: histories.Invoke, F: "acquire", Process: histories.Client(0), Time: 5},
		{Type: histories.Info, F: "acquire", Process: histories.Client(0), Time: 3e9},
		nemOp("start", 1, `"not an object"`),
	}
	pending := histories.History{{Type: histories.Invoke, F: "release", Process: histories.Client(3), Time: 7e12}}
	for name, h := range map[string]histories.History{"empty": nil, "zero latency at time 0": zero, "only info": onlyInfo, "pending only": pending} {
		for _, draw := range []func(*bytes.Buffer, histories.History) error{
			func(b *bytes.Buffer, h histories.History) error {
				return Latency(b, h, Chart{Marks: []Mark{{Seconds: 0}}})
			},
			func(b *bytes.Buffer, h histories.History) error { return Rate(b, h, Chart{}) },
		} {
			var buf bytes.Buffer
			if err := draw(&buf, h); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if _, err := png.Decode(&buf); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}
