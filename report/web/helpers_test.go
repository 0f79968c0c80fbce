package web

import (
	"bufio"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixture store (testdata/runs, trimmed from a real run, plus what fixture adds).
const (
	validRun   = "gozk-mutex/20261122T060322.360Z"
	invalidRun = "zlc-mutex-no-watch-mutex/20261122T070000.000Z"
	unknownRun = "gozk-mutex/20261121T120000.000Z"
	errorRun   = "gozk-mutex/20261121T060000.000Z"
	brokenRun  = "gozk-mutex/20261120T000000.000Z"
	// secret is the content of a file outside the store that no request may read.
	secret = "TOP-SECRET-outside-the-store"
)

// plotColours are the colours of the fixture plots: nothing else on a page has them.
func plotColours() (latency, rate color.NRGBA) {
	return color.NRGBA{R: 250, G: 20, B: 200, A: 255}, color.NRGBA{R: 20, G: 200, B: 250, A: 255}
}

// Size of the fixture plots, in pixels.
const plotW, plotH = 360, 240

// fixture copies testdata/runs into a temporary directory and adds what git does not
// keep well: the plots of the invalid run (solid latencyColour and rateColour), a
// rate.png of the unknown run that is not a PNG, the latest links, and links that
// lead out of the store or out of a run. It returns the store and the directory
// beside it that holds the secret.
func fixture(t *testing.T) (store, outside string) {
	t.Helper()
	tmp := t.TempDir()
	store, outside = filepath.Join(tmp, "store"), filepath.Join(tmp, "outside")
	if err := os.CopyFS(store, os.DirFS("testdata/runs")); err != nil {
		t.Fatal(err)
	}
	latency, rate := plotColours()
	writePNG(t, filepath.Join(store, invalidRun, "latency.png"), latency)
	writePNG(t, filepath.Join(store, invalidRun, "rate.png"), rate)
	must(t, os.WriteFile(filepath.Join(store, unknownRun, "rate.png"), []byte("not a png"), 0o644))

	// The outside directory looks like a run, so that a link to it would be served.
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte(secret), 0o644))
	results, err := os.ReadFile(filepath.Join(store, validRun, "results.json"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(outside, "results.json"), results, 0o644))

	links := map[string]string{
		"latest":                         validRun,
		"gozk-mutex/latest":              filepath.Base(validRun),
		"escape":                         "../outside",
		"escape-abs":                     outside,
		validRun + "/evil-abs":           filepath.Join(outside, "secret"),
		validRun + "/evil-rel":           "../../../outside/secret",
		validRun + "/evil-dir":           "../../../outside",
		validRun + "/other-run":          "../" + filepath.Base(unknownRun) + "/results.json",
		validRun + "/servers/s1/evil-up": "../../../../../outside/secret",
	}
	for link, target := range links {
		must(t, os.Symlink(target, filepath.Join(store, link)))
	}
	return store, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writePNG writes a plotW×plotH PNG filled with c.
func writePNG(t *testing.T, path string, c color.NRGBA) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, plotW, plotH))
	for y := range plotH {
		for x := range plotW {
			img.SetNRGBA(x, y, c)
		}
	}
	f, err := os.Create(path)
	must(t, err)
	if err := png.Encode(f, img); err != nil {
		f.Close()
		t.Fatal(err)
	}
	must(t, f.Close())
}

// server starts the browser of store on httptest.
func server(t *testing.T, store string) *httptest.Server {
	t.Helper()
	h, err := New(Config{Store: store})
	must(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches target from srv without following redirects.
func get(t *testing.T, srv *httptest.Server, target string) (*http.Response, string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(srv.URL + target)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp, string(body)
}

// rawGet sends target to srv as written, bypassing the client's URL cleaning, and
// follows redirects; it returns the final status and every body seen on the way.
func rawGet(t *testing.T, srv *httptest.Server, target string) (int, string) {
	t.Helper()
	u, err := url.Parse(srv.URL)
	must(t, err)
	var bodies strings.Builder
	for range 10 {
		conn, err := net.Dial("tcp", u.Host)
		must(t, err)
		_, err = io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: "+u.Host+"\r\nConnection: close\r\n\r\n")
		must(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		must(t, err)
		body, err := io.ReadAll(resp.Body)
		conn.Close()
		must(t, err)
		bodies.Write(body)
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode >= 400 || loc == "" {
			return resp.StatusCode, bodies.String()
		}
		next, err := url.Parse(loc)
		must(t, err)
		if next.Host != "" && next.Host != u.Host {
			t.Fatalf("%s redirects off the server to %s", target, loc)
		}
		target = next.RequestURI()
	}
	t.Fatalf("%s: too many redirects", target)
	return 0, ""
}
