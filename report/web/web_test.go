package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// listRows returns the run and status of each row of the list page, in order (the
// page as served, or as Chromium dumps it).
func listRows(page string) [][2]string {
	var rows [][2]string
	re := regexp.MustCompile(`<tr class="run" data-run="([^"]+)" data-status="([^"]+)">`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		rows = append(rows, [2]string{m[1], m[2]})
	}
	return rows
}

func TestListPage(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	resp, body := get(t, srv, "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers lack the CSP or nosniff: %v", resp.Header)
	}
	// Newest first; the latest links and the links out of the store are not runs.
	want := [][2]string{
		{invalidRun, "invalid"},
		{validRun, "valid"},
		{unknownRun, "unknown"},
		{errorRun, "error"},
		{brokenRun, "broken"},
	}
	got := listRows(body)
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d is %v, want %v", i, got[i], want[i])
		}
	}
	for _, s := range []string{
		`href="/run/` + validRun + `/"`,
		`<span class="verdict invalid">invalid</span>`,
		"zlc-mutex-no-watch", "client-partition", "kill, pause, partition", "2894750666936090", "30.2s", "1883",
		brokenRun + ": results.json: unexpected end of JSON input",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("list page lacks %q", s)
		}
	}
	if strings.Contains(body, "escape") || strings.Contains(body, "latest") {
		t.Errorf("list page shows a link as a run:\n%s", body)
	}
}

func TestListPageOfEmptyStore(t *testing.T) {
	srv := server(t, t.TempDir())
	resp, body := get(t, srv, "/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "No runs yet") {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, srv, "/latest"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/latest of an empty store: status %d", resp.StatusCode)
	}
}

func TestRunPage(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	resp, body := get(t, srv, "/run/"+invalidRun+"/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	base := "/run/" + invalidRun + "/"
	for _, s := range []string{
		`<span class="verdict invalid" id="verdict">invalid</span>`,
		`<img class="plot" src="` + base + `latency.png"`,
		`<img class="plot" src="` + base + `rate.png"`,
		`href="` + base + `timeline.html"`,
		`href="` + base + `linearizability.html"`,
		`href="` + base + `workers/w2-p1.stderr.log"`,
		`href="` + base + `history.jsonl?download=1"`,
		"process 1 acquired l0",
		"0.000 s",                    // first violation
		`&#34;client-partition&#34;`, // the configuration
	} {
		if !strings.Contains(body, s) {
			t.Errorf("run page lacks %q", s)
		}
	}
	// The witness is text, never markup.
	if !strings.Contains(body, "&lt;img src=x id=injected") || !strings.Contains(body, "&lt;/pre&gt;&lt;script&gt;") {
		t.Errorf("witness not escaped as text:\n%s", body)
	}
	if strings.Contains(body, "<img src=x") || strings.Contains(body, `<script>document.title`) {
		t.Errorf("witness injected markup:\n%s", body)
	}
	// Links in the run directory that lead elsewhere are not among its files.
	for _, s := range []string{"evil", "other-run"} {
		if strings.Contains(body, s) {
			t.Errorf("run page lists the link %s", s)
		}
	}

	// The valid run has its server files and no linearizability report or plots.
	_, body = get(t, srv, "/run/"+validRun+"/")
	for _, s := range []string{"servers/s1/data/version-2/snapshot.0", "servers/s1/zoo.cfg", "workers/w1-p1.stderr.log", "589 B"} {
		if !strings.Contains(body, s) {
			t.Errorf("valid run page lacks %q", s)
		}
	}
	for _, s := range []string{"linearizability.html", `class="plot"`} {
		if strings.Contains(body, s) {
			t.Errorf("valid run page has %q", s)
		}
	}

	_, body = get(t, srv, "/run/"+errorRun+"/")
	if !strings.Contains(body, "The run broke down: server s2 did not start") {
		t.Errorf("error run page lacks the setup error:\n%s", body)
	}
}

func TestBrokenRunPage(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	resp, body := get(t, srv, "/run/"+brokenRun+"/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, s := range []string{"This run is broken: results.json: unexpected end of JSON input", `href="/run/` + brokenRun + `/history.jsonl"`} {
		if !strings.Contains(body, s) {
			t.Errorf("broken run page lacks %q:\n%s", s, body)
		}
	}
}

func TestFiles(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	cases := []struct{ run, file, ctype string }{
		{validRun, "results.json", "application/json"},
		{validRun, "config.json", "application/json"},
		{validRun, "history.jsonl", "application/jsonl; charset=utf-8"},
		{validRun, "timeline.html", "text/html; charset=utf-8"},
		{validRun, "servers/s1/server.log", "text/plain; charset=utf-8"},
		{validRun, "servers/s1/zoo.cfg", "text/plain; charset=utf-8"},
		{validRun, "servers/s1/data/myid", "text/plain; charset=utf-8"},
		{validRun, "servers/s1/data/version-2/snapshot.0", "application/octet-stream"},
		{validRun, "workers/w1-p1.stderr.log", "text/plain; charset=utf-8"},
		{invalidRun, "linearizability.html", "text/html; charset=utf-8"},
		{invalidRun, "latency.png", "image/png"},
		{unknownRun, "rate.png", "image/png"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(store, c.run, c.file))
			must(t, err)
			resp, body := get(t, srv, "/run/"+c.run+"/"+c.file)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
			if body != string(want) {
				t.Errorf("body differs from the file")
			}
			if resp.Header.Get("Content-Disposition") != "" {
				t.Errorf("Content-Disposition %q without ?download", resp.Header.Get("Content-Disposition"))
			}
		})
	}
	resp, _ := get(t, srv, "/run/"+validRun+"/servers/s1/server.log?download=1")
	if got := resp.Header.Get("Content-Disposition"); got != "attachment; filename=server.log" {
		t.Errorf("download: Content-Disposition %q", got)
	}
}

func TestRoutes(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	cases := []struct {
		target   string
		status   int
		location string
	}{
		{"/latest", http.StatusFound, "/run/" + invalidRun + "/"},
		{"/run/latest/", http.StatusFound, "/run/" + validRun + "/"},
		{"/run/gozk-mutex/latest/", http.StatusFound, "/run/" + validRun + "/"},
		{"/run/gozk-mutex/latest/results.json", http.StatusFound, "/run/" + validRun + "/results.json"},
		{"/run/" + validRun, http.StatusMovedPermanently, "/run/" + validRun + "/"},
		{"/run/" + validRun + "/servers", http.StatusFound, "/run/" + validRun + "/#files"},
		{"/run/", http.StatusFound, "/"},
		{"/run/gozk-mutex/", http.StatusNotFound, ""},
		{"/run/no-such-test/20261122T060322.360Z/", http.StatusNotFound, ""},
		{"/run/" + validRun + "/no-such-file", http.StatusNotFound, ""},
		{"/nope", http.StatusNotFound, ""},
		{"/static/style.css", http.StatusOK, ""},
		{"/static/page.js", http.StatusOK, ""},
	}
	for _, c := range cases {
		resp, body := get(t, srv, c.target)
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s: status %d location %q, want %d %q\n%s", c.target, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location, body)
		}
	}
	resp, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d", resp.StatusCode)
	}
}

// TestPathTraversal: nothing outside the store, and nothing outside a run's
// directory, can be read through the run's file URLs: not with .., not encoded, not
// with absolute paths, and not through symbolic links.
func TestPathTraversal(t *testing.T) {
	store, outside := fixture(t)
	srv := server(t, store)
	run := "/run/" + validRun
	targets := []string{
		run + "/../../../outside/secret",
		run + "/%2e%2e/%2e%2e/%2e%2e/outside/secret",
		run + "/..%2f..%2f..%2foutside%2fsecret",
		"/run/gozk-mutex%2f..%2f..%2foutside%2fsecret",
		"/run/..%2foutside/secret",
		"/run/%2e%2e/outside/secret",
		"/run/" + strings.TrimPrefix(outside, "/") + "/secret",
		"/run//" + strings.TrimPrefix(outside, "/") + "/secret",
		"/run/%2f" + strings.ReplaceAll(strings.TrimPrefix(outside, "/"), "/", "%2f") + "%2fsecret",
		run + "/..\\..\\..\\outside\\secret",
		run + "/%5c..%5c..%5c..%5coutside%5csecret",
		run + "/evil-abs",
		run + "/evil-rel",
		run + "/evil-dir/secret",
		run + "/servers/s1/evil-up",
		run + "/other-run", // in the store, but in another run
		"/run/escape/",
		"/run/escape/secret",
		"/run/escape-abs/secret",
		"/run/escape/results.json",
		"/run/" + validRun + "/%00",
	}
	for _, target := range targets {
		status, body := rawGet(t, srv, target)
		if status == http.StatusOK || strings.Contains(body, secret) {
			t.Errorf("%s: status %d, body:\n%s", target, status, body)
		}
		if status != http.StatusNotFound && status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 404 or 400", target, status)
		}
	}
	// The links are there: reading them directly would have shown the secret.
	data, err := os.ReadFile(filepath.Join(store, validRun, "evil-rel"))
	if err != nil || string(data) != secret {
		t.Fatalf("fixture: evil-rel reads %q, %v", data, err)
	}
}

func TestNewRejectsABadStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, store := range []string{"", filepath.Join(t.TempDir(), "missing"), file} {
		if _, err := New(Config{Store: store}); err == nil {
			t.Errorf("New(%q) succeeded", store)
		}
	}
}

func TestServe(t *testing.T) {
	store, _ := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Store: store}, "127.0.0.1:0", pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read the address: %v (Serve: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no URL in %q", line)
	}
	resp, err := http.Get(strings.TrimSpace(line[i:]))
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), invalidRun) {
		t.Errorf("status %d:\n%s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := Serve(context.Background(), Config{Store: store}, "256.0.0.1:bad", io.Discard); err == nil {
		t.Error("Serve on a bad address succeeded")
	}
}

// TestRootConfines: even a path that got past splitPath cannot leave the run's
// directory, because the file is opened through the run's os.Root.
func TestRootConfines(t *testing.T) {
	store, _ := fixture(t)
	root, err := os.OpenRoot(store)
	must(t, err)
	defer root.Close()
	run, err := root.OpenRoot(validRun)
	must(t, err)
	defer run.Close()
	for _, name := range []string{"../../../outside/secret", "../" + filepath.Base(unknownRun) + "/results.json", "evil-rel", "/etc/passwd"} {
		w := httptest.NewRecorder()
		serveFile(w, httptest.NewRequest("GET", "/x", nil), run, validRun, name)
		if w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), secret) {
			t.Errorf("%s: status %d, body %q", name, w.Code, w.Body.String())
		}
	}
}

// TestStoreInAStore: a store kept inside the store (zlockcheck run --store
// store/chaos) shows its runs too, under their path.
func TestStoreInAStore(t *testing.T) {
	store, _ := fixture(t)
	nested := "chaos/gozk-mutex/20261123T000000.000Z"
	must(t, os.CopyFS(filepath.Join(store, nested), os.DirFS(filepath.Join("testdata/runs", validRun))))
	srv := server(t, store)
	_, body := get(t, srv, "/")
	rows := listRows(body)
	if len(rows) == 0 || rows[0] != [2]string{nested, "valid"} {
		t.Errorf("rows %v, want %s first", rows, nested)
	}
	resp, body := get(t, srv, "/run/"+nested+"/servers/s1/zoo.cfg")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "tickTime=200") {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}
