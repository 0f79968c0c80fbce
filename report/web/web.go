// Package web owns the results browser of `zlockcheck serve`: an http.Handler that
// lists every run kept in a store (store/<test>/<timestamp>/, as written by the harness
// and the report package) and shows one run's verdict, checks, configuration, plots
// and files. A run's page opens with its verdict and why: for a run that is not valid,
// each check that failed with its cause class and witness, before the run's facts and
// plots. It only reads the store; every file it serves is opened through an
// os.Root, so no request reaches outside the store.
package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Config says what the browser serves.
type Config struct {
	// Store is the directory that keeps every run (zlockcheck run --store).
	Store string
}

// Handler serves the results browser of one store. Make it with New.
type Handler struct {
	store string
	mux   *http.ServeMux
	list  *template.Template
	run   *template.Template
}

// New returns the browser of cfg's store, which must be a directory.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == "" {
		return nil, errors.New("web: no store directory")
	}
	fi, err := os.Stat(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("web: store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("web: store %s is not a directory", cfg.Store)
	}
	h := &Handler{store: cfg.Store, mux: http.NewServeMux()}
	if h.list, err = template.New("list").Funcs(funcMap()).Parse(listHTML); err != nil {
		return nil, err
	}
	if h.run, err = template.New("run").Funcs(funcMap()).Parse(runHTML); err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET /{$}", h.serveList)
	h.mux.HandleFunc("GET /latest", h.serveLatest)
	h.mux.HandleFunc("GET /run/{path...}", h.serveRun)
	h.mux.HandleFunc("GET /static/style.css", serveStatic("text/css; charset=utf-8", styleCSS))
	h.mux.HandleFunc("GET /static/page.js", serveStatic("text/javascript; charset=utf-8", pageJS))
	return h, nil
}

// ServeHTTP serves the list page at /, a run's page at /run/<run>/, the run's files
// below it, and /latest, which redirects to the newest run.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

// Serve listens on addr and serves cfg's store until ctx is done, then shuts the
// server down. It prints the address it serves on to out.
func Serve(ctx context.Context, cfg Config, addr string, out io.Writer) error {
	h, err := New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "serving the runs in %s on http://%s/\n", cfg.Store, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pageCSP keeps the browser's own pages to their stylesheet, script and images.
const pageCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// render executes t into a buffer first, so a failing template is a clean 500.
func render(w http.ResponseWriter, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Write(buf.Bytes())
}

func serveStatic(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}
}

func (h *Handler) serveList(w http.ResponseWriter, r *http.Request) {
	root, err := os.OpenRoot(h.store)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	runs, err := listRuns(root)
	if err != nil {
		http.Error(w, "list runs: "+err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, h.list, listPage{Store: h.store, Runs: runs})
}

func (h *Handler) serveLatest(w http.ResponseWriter, r *http.Request) {
	root, err := os.OpenRoot(h.store)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	runs, err := listRuns(root)
	if err != nil {
		http.Error(w, "list runs: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if len(runs) == 0 {
		http.Error(w, "no runs in the store yet", http.StatusNotFound)
		return
	}
	http.Redirect(w, r, runs[0].URL, http.StatusFound)
}
