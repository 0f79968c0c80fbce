package web

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// These tests load the pages in a real headless browser: Debian's chromium.

// requireChromium returns the Chromium binary. Without one the test is skipped
// (fails under ZLC_REQUIRE_INTEGRATION; skips in -short mode: see testenv).
func requireChromium(t *testing.T) string {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Chromium)
	return testenv.ChromiumPath()
}

// chromium runs headless Chromium with args (after the common ones) and returns its
// standard output. Virtual time lets the page's scripts run before the dump or the
// screenshot; the context only keeps a hung browser from hanging the test.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin := requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	common := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--virtual-time-budget=5000",
		"--user-data-dir=" + t.TempDir(),
	}
	cmd := exec.CommandContext(ctx, bin, append(common, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 3000))
	}
	return stdout.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// dumpDOM returns the DOM of the page at url after its scripts ran.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	dom := string(chromium(t, "--dump-dom", url))
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium dumped no page for %s:\n%s", url, dom)
	}
	return dom
}

// screenshot returns the page at url as Chromium draws it in a width×height window.
func screenshot(t *testing.T, url string, width, height int) image.Image {
	t.Helper()
	out := filepath.Join(t.TempDir(), "page.png")
	chromium(t, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--screenshot="+out, url)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("chromium took no screenshot of %s: %v", url, err)
	}
	if dir := os.Getenv("ZLC_KEEP_SCREENSHOTS"); dir != "" {
		page := url[strings.Index(url, "//")+2:]
		page = page[strings.Index(page, "/"):]
		name := strings.NewReplacer("/", "_", ":", "_").Replace(t.Name()+page) + ".png"
		must(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	return img
}

// countColour counts the pixels of img within a small distance of c, and returns
// their bounding box.
func countColour(img image.Image, c color.NRGBA) (int, image.Rectangle) {
	const tolerance = 6
	near := func(a uint32, b uint8) bool {
		d := int(a>>8) - int(b)
		return d <= tolerance && d >= -tolerance
	}
	n, box := 0, image.Rectangle{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, c.R) && near(g, c.G) && near(bl, c.B) {
				n++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return n, box
}

// links returns every href and src of a dumped page.
func links(dom string) []string {
	re := regexp.MustCompile(`\s(?:href|src)="([^"]*)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(dom, -1) {
		out = append(out, strings.ReplaceAll(m[1], "&amp;", "&"))
	}
	return out
}

// fetchAll fetches every link through srv, following redirects, and expects 200.
func fetchAll(t *testing.T, srv *httptest.Server, page string, hrefs []string) {
	t.Helper()
	for _, href := range hrefs {
		if !strings.HasPrefix(href, "/") {
			t.Errorf("%s: link %q is not a path on the server", page, href)
			continue
		}
		resp, err := http.Get(srv.URL + href)
		if err != nil {
			t.Errorf("%s: %s: %v", page, href, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s: status %d", page, href, resp.StatusCode)
		}
	}
}

func TestBrowserListPage(t *testing.T) {
	requireChromium(t)
	store, _ := fixture(t)
	srv := server(t, store)
	dom := dumpDOM(t, srv.URL+"/")
	want := [][2]string{{invalidRun, "invalid"}, {validRun, "valid"}, {unknownRun, "unknown"}, {errorRun, "error"}, {brokenRun, "broken"}}
	got := listRows(dom)
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v\n%s", got, want, dom)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("row %d is %v, want %v", i, got[i], w)
		}
		badge := regexp.MustCompile(`<span class="verdict ` + w[1] + `"[^>]*>` + w[1] + `</span>`)
		link := `<a class="runlink" href="/run/` + w[0] + `/">`
		if !badge.MatchString(dom) || !strings.Contains(dom, link) {
			t.Errorf("%s: no %s badge or no %s", w[0], w[1], link)
		}
	}
	hrefs := links(dom)
	if len(hrefs) < len(want)+1 { // the stylesheet and each run
		t.Errorf("links %v", hrefs)
	}
	fetchAll(t, srv, "/", hrefs)

	// The verdicts are drawn in their colours: green, red, amber.
	img := screenshot(t, srv.URL+"/", 1100, 500)
	for name, c := range map[string]color.NRGBA{
		"valid (green)":          {R: 0x1e, G: 0x8c, B: 0x3a},
		"invalid (red)":          {R: 0xd0, G: 0x31, B: 0x2d},
		"unknown, error (amber)": {R: 0xf2, G: 0xa9, B: 0x00},
	} {
		if n, _ := countColour(img, c); n < 300 {
			t.Errorf("list page: %d pixels of %s", n, name)
		}
	}
}

func TestBrowserRunPage(t *testing.T) {
	requireChromium(t)
	store, _ := fixture(t)
	srv := server(t, store)
	for _, run := range []string{invalidRun, validRun, unknownRun, errorRun, brokenRun} {
		page := "/run/" + run + "/"
		dom := dumpDOM(t, srv.URL+page)
		hrefs := links(dom)
		for _, f := range []string{"results.json", "history.jsonl"} {
			if !strings.Contains(dom, `href="`+page+f+`"`) {
				t.Errorf("%s: no link to %s", page, f)
			}
		}
		fetchAll(t, srv, page, hrefs)
		if run == invalidRun {
			for _, f := range []string{"timeline.html", "linearizability.html", "workers/w1-p0.stderr.log"} {
				if !strings.Contains(dom, `href="`+page+f+`"`) {
					t.Errorf("%s: no link to %s", page, f)
				}
			}
			// The page's script marked each plot loaded or not once the page loaded.
			for _, f := range []string{"latency.png", "rate.png"} {
				img := `<img class="plot" src="` + page + f + `" alt="` + f + `" data-loaded="yes">`
				if !strings.Contains(dom, img) {
					t.Errorf("%s: %s did not load:\n%s", page, f, dom)
				}
			}
			// The witness is shown as text; its markup never became elements.
			title := regexp.MustCompile(`<title>([^<]*)</title>`).FindStringSubmatch(dom)
			if strings.Contains(dom, `id="injected"`) || title == nil || strings.Contains(title[1], "pwned") {
				t.Errorf("%s: the witness injected markup:\n%s", page, dom)
			}
			if !strings.Contains(dom, "&lt;img src=x id=injected") {
				t.Errorf("%s: the witness is not shown:\n%s", page, dom)
			}
		}
		if run == unknownRun {
			// Its rate.png is not a PNG: the page says so.
			img := `<img class="plot" src="` + page + `rate.png" alt="rate.png" data-loaded="no">`
			if !strings.Contains(dom, img) || !strings.Contains(dom, "rate.png could not be shown") {
				t.Errorf("%s: the broken plot is not marked:\n%s", page, dom)
			}
		}
	}
}

// TestBrowserPlotsRender: the plots are drawn on the run page, each at its size, in
// its own colour.
func TestBrowserPlotsRender(t *testing.T) {
	requireChromium(t)
	store, _ := fixture(t)
	srv := server(t, store)
	img := screenshot(t, srv.URL+"/run/"+invalidRun+"/", 1280, 2000)
	latency, rate := plotColours()
	for name, c := range map[string]color.NRGBA{"latency.png": latency, "rate.png": rate} {
		n, box := countColour(img, c)
		if n < plotW*plotH*9/10 {
			t.Errorf("%s: %d pixels of its colour in the screenshot, want about %d", name, n, plotW*plotH)
			continue
		}
		if box.Dx() != plotW || box.Dy() != plotH {
			t.Errorf("%s drawn at %v, want %d×%d", name, box, plotW, plotH)
		}
	}
	// A run without plots has none of those colours.
	img = screenshot(t, srv.URL+"/run/"+validRun+"/", 1280, 2000)
	for _, c := range []color.NRGBA{latency, rate} {
		if n, _ := countColour(img, c); n > 0 {
			t.Errorf("the valid run's page has %d pixels of a plot's colour", n)
		}
	}
}

// TestBrowserReasonFirst: as Chromium builds and draws the run pages, the reason
// comes first. In the DOM, an invalid run's failed check, cause class and witness
// precede the run's facts, plots and table of checks, and a valid run's line saying
// every check passed precedes its facts; on screen, the invalid run's reason (the
// red bar beside its check, cause and witness) is drawn above its plots.
func TestBrowserReasonFirst(t *testing.T) {
	requireChromium(t)
	store, _ := fixture(t)
	srv := server(t, store)
	cases := reasonFirstCases()
	for _, run := range []string{invalidRun, validRun} {
		dom := dumpDOM(t, srv.URL+"/run/"+run+"/")
		assertOrder(t, run, dom, cases[run]...)
	}

	img := screenshot(t, srv.URL+"/run/"+invalidRun+"/", 1280, 2000)
	latency, _ := plotColours()
	n, plot := countColour(img, latency)
	if n == 0 {
		t.Fatal("the latency plot is not drawn")
	}
	bar, ok := verticalRun(img, color.NRGBA{R: 0xd0, G: 0x31, B: 0x2d}, 80)
	if !ok {
		t.Fatal("no red bar beside the reason")
	}
	if bar.Max.Y > plot.Min.Y {
		t.Errorf("the reason is drawn at %v, not above the latency plot at %v", bar, plot)
	}
}

// verticalRun finds the topmost run of at least minLen pixels of colour c down one
// column of img: the bar beside a block.
func verticalRun(img image.Image, c color.NRGBA, minLen int) (image.Rectangle, bool) {
	const tolerance = 6
	near := func(a uint32, b uint8) bool {
		d := int(a>>8) - int(b)
		return d <= tolerance && d >= -tolerance
	}
	best, found := image.Rectangle{}, false
	b := img.Bounds()
	for x := b.Min.X; x < b.Max.X; x++ {
		start := -1
		for y := b.Min.Y; y <= b.Max.Y; y++ {
			in := false
			if y < b.Max.Y {
				r, g, bl, _ := img.At(x, y).RGBA()
				in = near(r, c.R) && near(g, c.G) && near(bl, c.B)
			}
			switch {
			case in && start < 0:
				start = y
			case !in && start >= 0:
				if y-start >= minLen && (!found || start < best.Min.Y) {
					best, found = image.Rect(x, start, x+1, y), true
				}
				start = -1
			}
		}
	}
	return best, found
}
