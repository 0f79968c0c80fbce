package plots

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Width and Height are the size of every picture, in pixels.
const (
	Width  = 1200
	Height = 540
)

const (
	dpi         = 96
	legendWidth = 210 // pixels right of the plot area, for the legend
	margin      = 6   // pixels around the plot
)

// Mark is a moment to draw as a red vertical line across a picture.
type Mark struct {
	// Seconds is the moment, in seconds since the run started.
	Seconds float64
	// Label says what happened then, e.g. "first violation (key l0)".
	Label string
}

// Chart is what a picture shows besides the history's ops.
type Chart struct {
	// Title heads the picture, e.g. the test's name.
	Title string
	// Marks are drawn as red vertical lines, e.g. each invalid check's first violation.
	Marks []Mark
}

// done is one completed client op.
type done struct {
	f       string
	typ     histories.Type
	at      float64 // completion time, seconds
	latency float64 // seconds from invoke to completion
}

// completions pairs the client ops of h (histories.Pairs); it returns the completed
// ops in completion order and how many invokes were never completed.
func completions(h histories.History) ([]done, int) {
	pairs := histories.Pairs(h)
	ds := make([]done, 0, len(pairs))
	for _, p := range pairs {
		if p.Completion < 0 {
			continue
		}
		inv, op := &h[p.Invoke], &h[p.Completion]
		ds = append(ds, done{f: inv.F, typ: op.Type, at: float64(op.Time) / 1e9, latency: float64(op.Time-inv.Time) / 1e9})
	}
	return ds, len(pairs) - len(ds)
}

// typeColor is the colour of an outcome on every picture.
func typeColor(t histories.Type) color.Color {
	switch t {
	case histories.OK:
		return color.RGBA{R: 0x1f, G: 0x9e, B: 0x3a, A: 0xff}
	case histories.Fail:
		return color.RGBA{R: 0x5b, G: 0x4b, B: 0xc4, A: 0xff}
	}
	return color.RGBA{R: 0xf0, G: 0x8c, B: 0x00, A: 0xff}
}

// violationColor draws the marks.
func violationColor() color.Color { return color.RGBA{R: 0xd6, G: 0x10, B: 0x10, A: 0xff} }

// bandColor shades the i-th fault class (in order of appearance), translucent.
func bandColor(i int) color.Color {
	palette := [...]color.NRGBA{
		{R: 0x64, G: 0x95, B: 0xed, A: 0x50},
		{R: 0xda, G: 0xa5, B: 0x20, A: 0x50},
		{R: 0x9a, G: 0xcd, B: 0x32, A: 0x50},
		{R: 0xba, G: 0x55, B: 0xd3, A: 0x50},
		{R: 0x20, G: 0xb2, B: 0xaa, A: 0x50},
		{R: 0x99, G: 0x99, B: 0x99, A: 0x50},
	}
	return palette[i%len(palette)]
}

// fShape is the marker of a function on the latency picture.
func fShape(f string) draw.GlyphDrawer {
	switch f {
	case histories.FAcquire:
		return draw.CircleGlyph{}
	case histories.FRelease:
		return draw.BoxGlyph{}
	}
	return draw.CrossGlyph{}
}

// rateColor is the colour of a series on the rate picture: ok acquires green as on
// the latency picture, ok releases blue so the two lines can be told apart.
func rateColor(s series) color.Color {
	if s.typ == histories.OK && s.f != histories.FAcquire {
		return color.RGBA{R: 0x1f, G: 0x6f, B: 0xd0, A: 0xff}
	}
	return typeColor(s.typ)
}

// fDashes is the dash pattern of a function on the rate picture.
func fDashes(f string) []vg.Length {
	switch f {
	case histories.FAcquire:
		return nil
	case histories.FRelease:
		return []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return []vg.Length{vg.Points(2), vg.Points(2)}
}

// series is one (function, outcome) pair; info ops are one series on rate.png.
type series struct {
	f   string
	typ histories.Type
}

func (s series) name() string {
	if s.f == "" {
		return string(s.typ)
	}
	return s.f + " " + string(s.typ)
}

func sortSeries(ss []series) {
	rank := map[histories.Type]int{histories.OK: 0, histories.Fail: 1, histories.Info: 2}
	fRank := func(f string) int {
		switch f {
		case histories.FAcquire:
			return 0
		case histories.FRelease:
			return 1
		}
		return 2
	}
	sort.Slice(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if rank[a.typ] != rank[b.typ] {
			return rank[a.typ] < rank[b.typ]
		}
		if fRank(a.f) != fRank(b.f) {
			return fRank(a.f) < fRank(b.f)
		}
		return a.f < b.f
	})
}

// Latency writes latency.png: each completed op a point at its completion time, its
// latency on a log scale, coloured by outcome (ok, fail, info) and shaped by function.
// Info ops, whose latency is unknown, are triangles on the top row, labelled
// "unknown". Faults are shaded and labelled; marks are red vertical lines.
func Latency(w io.Writer, h histories.History, c Chart) (err error) {
	defer recoverInto(&err, "latency")
	p, leg, err := latencyPlot(h, c)
	if err != nil {
		return err
	}
	return writePNG(w, p, leg)
}

// Rate writes rate.png: completions per second, in bins, of each function and outcome
// (acquire ok, acquire fail, release ok, ..., and all info ops as one line). Faults are
// shaded and labelled; marks are red vertical lines.
func Rate(w io.Writer, h histories.History, c Chart) (err error) {
	defer recoverInto(&err, "rate")
	p, leg, err := ratePlot(h, c)
	if err != nil {
		return err
	}
	return writePNG(w, p, leg)
}

// recoverInto turns a panic of the plotting library (it panics on some data it
// cannot draw) into an error.
func recoverInto(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("drawing the %s picture: %v", what, r)
	}
}

// base is a plot with the history's time on x, its faults shaded and its marks drawn.
func base(h histories.History, c Chart, title string) (*plot.Plot, plot.Legend, []plot.Plotter) {
	p := plot.New()
	p.Title.Text = title
	if c.Title != "" {
		p.Title.Text = c.Title + ": " + title
	}
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = "seconds since the run started"
	p.X.Tick.Marker = secondTicks{}
	p.BackgroundColor = color.White
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(10)
	leg.ThumbnailWidth = vg.Points(16)

	faults := Faults(h)
	small := p.X.Label.TextStyle
	small.Font.Size = vg.Points(8)
	small.XAlign, small.YAlign = draw.XLeft, draw.YTop
	b := &bands{faults: faults, style: small}
	colorOf := map[string]color.Color{}
	for _, f := range faults {
		if _, ok := colorOf[f.Name]; !ok {
			colorOf[f.Name] = bandColor(len(colorOf))
			leg.Add("fault: "+f.Name, swatch{colorOf[f.Name]})
		}
	}
	b.color = colorOf
	marks := &markLines{marks: c.Marks, style: small}
	marks.style.Color = violationColor()
	if len(c.Marks) > 0 {
		leg.Add("first violation", swatch{violationColor()})
	}
	return p, leg, []plot.Plotter{b, marks}
}

func latencyPlot(h histories.History, c Chart) (*plot.Plot, plot.Legend, error) {
	ds, pending := completions(h)
	const floor = 1e-3 // ms: a latency of 0 is drawn at 1µs
	lo, hi := math.Inf(1), math.Inf(-1)
	nInfo := 0
	for _, d := range ds {
		if d.typ == histories.Info {
			nInfo++
			continue
		}
		ms := max(d.latency*1e3, floor)
		lo, hi = min(lo, ms), max(hi, ms)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1000
	}
	ymin := math.Pow(10, math.Floor(math.Log10(lo)))
	top := math.Pow(10, math.Ceil(math.Log10(hi))+1) // the row of info ops
	title := fmt.Sprintf("latency of %d completed ops (%d info, latency unknown)", len(ds), nInfo)
	if pending > 0 {
		title += fmt.Sprintf(", %d never completed", pending)
	}
	p, leg, under := base(h, c, title)
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = latencyTicks{top: top}
	p.Add(under[0])

	pts := map[series]plotter.XYs{}
	for _, d := range ds {
		y := top
		if d.typ != histories.Info {
			y = max(d.latency*1e3, floor)
		}
		s := series{d.f, d.typ}
		pts[s] = append(pts[s], plotter.XY{X: d.at, Y: y})
	}
	keys := make([]series, 0, len(pts))
	for s := range pts {
		keys = append(keys, s)
	}
	sortSeries(keys)
	radius := vg.Points(2.2)
	if len(ds) > 5000 {
		radius = vg.Points(1.2)
	}
	unknown := plotter.NewFunction(func(float64) float64 { return top })
	unknown.Color = color.Gray{Y: 0xb0}
	unknown.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(unknown)
	for _, s := range keys {
		sc, err := plotter.NewScatter(pts[s])
		if err != nil {
			return nil, leg, fmt.Errorf("latency of %s: %w", s.name(), err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: typeColor(s.typ), Radius: radius, Shape: fShape(s.f)}
		if s.typ == histories.Info {
			sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			sc.GlyphStyle.Radius = radius * 1.3
		}
		p.Add(sc)
		name := s.name()
		if s.typ == histories.Info {
			name += " (top row)"
		}
		leg.Add(fmt.Sprintf("%s: %d", name, len(pts[s])), sc)
	}
	p.Add(under[1])
	p.X.Min, p.X.Max = 0, max(End(h), 1e-9)
	p.Y.Min, p.Y.Max = ymin, top
	return p, leg, nil
}

// latencyTicks are log ticks whose top one, the row of info ops, reads "unknown".
type latencyTicks struct{ top float64 }

// Ticks implements plot.Ticker.
func (t latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, tk := range (plot.LogTicks{Prec: -1}).Ticks(lo, hi) {
		if tk.Value < t.top*0.999 {
			ticks = append(ticks, tk)
		}
	}
	return append(ticks, plot.Tick{Value: t.top, Label: "unknown"})
}

// secondTicks label round numbers of seconds, about ten of them, with a minor tick
// between each two.
type secondTicks struct{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if span <= 0 {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', -1, 64)}}
	}
	step := math.Pow(10, math.Floor(math.Log10(span/10)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 12 {
			step *= m
			break
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo/step*2) / 2; i*step <= hi+step*1e-9; i += 0.5 {
		v := i * step
		if i == math.Trunc(i) {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}

// plainTicks are gonum's default ticks labelled without trailing zeros.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// binWidth picks a bin of a round number of seconds giving at most about 80 bins.
func binWidth(end float64) float64 {
	const most = 80
	for _, b := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if end/b <= most {
			return b
		}
	}
	return math.Ceil(end/most/600) * 600
}

func ratePlot(h histories.History, c Chart) (*plot.Plot, plot.Legend, error) {
	ds, _ := completions(h)
	end := max(End(h), 1e-9)
	bin := binWidth(end)
	n := max(int(math.Ceil(end/bin-1e-9)), 1)
	width := func(i int) float64 { // the last bin ends with the history
		if i == n-1 {
			return max(end-float64(i)*bin, bin/10)
		}
		return bin
	}
	counts := map[series][]float64{}
	totals := map[series]int{}
	for _, d := range ds {
		s := series{d.f, d.typ}
		if d.typ == histories.Info {
			s.f = ""
		}
		if counts[s] == nil {
			counts[s] = make([]float64, n)
		}
		i := min(int(d.at/bin), n-1)
		counts[s][i]++
		totals[s]++
	}
	title := fmt.Sprintf("completed ops per second (%g s bins)", bin)
	p, leg, under := base(h, c, title)
	p.Y.Label.Text = "ops per second"
	p.Y.Tick.Marker = plainTicks{}
	p.Add(under[0])
	keys := make([]series, 0, len(counts))
	for s := range counts {
		keys = append(keys, s)
	}
	sortSeries(keys)
	ymax := 1.0
	for _, s := range keys {
		xys := make(plotter.XYs, 0, n+1)
		for i, v := range counts[s] {
			xys = append(xys, plotter.XY{X: float64(i) * bin, Y: v / width(i)})
			ymax = max(ymax, v/width(i))
		}
		xys = append(xys, plotter.XY{X: end, Y: xys[len(xys)-1].Y})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, leg, fmt.Errorf("rate of %s: %w", s.name(), err)
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = draw.LineStyle{Color: rateColor(s), Width: vg.Points(1.3), Dashes: fDashes(s.f)}
		if s.typ == histories.Info {
			l.Dashes = nil
		}
		p.Add(l)
		leg.Add(fmt.Sprintf("%s: %d", s.name(), totals[s]), l)
	}
	p.Add(under[1])
	p.X.Min, p.X.Max = 0, end
	p.Y.Min, p.Y.Max = 0, ymax*1.25 // headroom for the fault labels
	return p, leg, nil
}

// px converts pixels to the plot's lengths.
func px(n float64) vg.Length { return vg.Length(n * 72 / dpi) }

// render draws p with its legend on the right; it returns the canvas and the area in
// which p drew its data.
func render(p *plot.Plot, leg plot.Legend) (*vgimg.Canvas, draw.Canvas) {
	img := vgimg.NewWith(vgimg.UseWH(px(Width), px(Height)), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	area := draw.Crop(dc, px(margin), -px(legendWidth), px(margin), -px(margin))
	p.Draw(area)
	legArea := draw.Crop(dc, px(Width-legendWidth+margin), -px(margin), px(margin), -px(40))
	leg.Draw(legArea)
	return img, p.DataCanvas(area)
}

func writePNG(w io.Writer, p *plot.Plot, leg plot.Legend) error {
	img, _ := render(p, leg)
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// bands shades each fault from its start to its stop across the whole height, with
// its label at the top (stacked when faults overlap).
type bands struct {
	faults []Fault
	color  map[string]color.Color
	style  text.Style
}

// Plot implements plot.Plotter.
func (b *bands) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	lineH := b.style.Rectangle("Mg").Size().Y + vg.Points(1)
	var levelEnds []vg.Length // right end of the last label on each level
	for _, f := range b.faults {
		x0 := min(max(x(f.Start), c.Min.X), c.Max.X)
		x1 := min(max(x(f.Stop), c.Min.X), c.Max.X)
		x1 = max(x1, x0+vg.Points(1))
		c.FillPolygon(b.color[f.Name], []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		w := b.style.Rectangle(f.Label).Size().X
		level := 0
		for level < len(levelEnds) && levelEnds[level] > x0 {
			level++
		}
		if level == len(levelEnds) {
			levelEnds = append(levelEnds, 0)
		}
		levelEnds[level] = x0 + w + vg.Points(6)
		c.FillText(b.style, vg.Point{X: x0 + vg.Points(2), Y: c.Max.Y - vg.Points(2) - vg.Length(level)*lineH}, f.Label)
	}
}

// markLines draws each mark as a red vertical line labelled at its foot.
type markLines struct {
	marks []Mark
	style text.Style
}

// Plot implements plot.Plotter.
func (m *markLines) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	line := draw.LineStyle{Color: violationColor(), Width: vg.Points(1.5)}
	sty := m.style
	sty.YAlign = draw.YBottom
	lineH := sty.Rectangle("Mg").Size().Y + vg.Points(1)
	for i, mk := range m.marks {
		at := x(mk.Seconds)
		if at < c.Min.X || at > c.Max.X {
			continue
		}
		c.StrokeLine2(line, at, c.Min.Y, at, c.Max.Y)
		label := fmt.Sprintf("%s at %.3fs", mk.Label, mk.Seconds)
		pt := vg.Point{X: at + vg.Points(3), Y: c.Min.Y + vg.Points(2) + vg.Length(i)*lineH}
		if at+sty.Rectangle(label).Size().X+vg.Points(3) > c.Max.X {
			sty.XAlign = draw.XRight
			pt.X = at - vg.Points(3)
		} else {
			sty.XAlign = draw.XLeft
		}
		c.FillText(sty, pt, label)
	}
}

// swatch is a legend thumbnail filled with one colour.
type swatch struct{ c color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}
