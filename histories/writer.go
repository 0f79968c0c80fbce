package histories

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("histories: writer is closed")

// syncEvery is how often a Writer's background goroutine flushes and fsyncs what was
// appended since the last time; an op is on disk at most about this long (plus the
// fsync) after Append returned.
const syncEvery = 500 * time.Millisecond

// Writer appends ops to a history file as a run goes. It is safe for concurrent use.
//
// Appends go through a buffer that is written out and fsynced at least every
// half-second by a background goroutine, and on Sync and Close. The file is written in
// whole lines, so a run killed at any moment leaves a file Load accepts, short of at
// most the last second of ops (and, were a write itself cut short, with a truncated
// last line, which Load drops).
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	bw     *bufio.Writer
	line   []byte // scratch for encoding
	next   int64  // the index of the next op
	track  Pairer
	dirty  bool  // appended since the last flush
	closed bool  // Close was called
	err    error // the first write or fsync error; every later call returns it

	stop chan struct{} // closed by Close to stop the syncer
	done chan struct{} // closed by the syncer when it stops
}

// NewWriter creates (or truncates) the history file at path and starts its background
// syncer; the caller must Close the Writer.
func NewWriter(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	// Make the new file's name durable too.
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync() //nolint:errcheck // best effort: some file systems refuse to sync directories
		dir.Close()
	}
	w := &Writer{
		f:     f,
		bw:    bufio.NewWriterSize(f, 64<<10),
		track: Pairer{unit: "index"},
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go w.syncer()
	return w, nil
}

// Append writes op to the history with the next index (0 for the first op) and returns
// it as written. It rejects, writing nothing, an op that would make the file invalid:
// a bad field (see Validate), a Value that is not JSON, or an op that breaks the pairing
// rules given the ops appended before it. Such an error is a *ValidationError; errors
// writing the file are returned by this and every later call.
func (w *Writer) Append(op Op) (Op, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return op, ErrClosed
	}
	if w.err != nil {
		return op, w.err
	}
	op.Index = w.next
	pos := int(op.Index)
	if fld, msg := checkOp(&op); msg != "" {
		return op, &ValidationError{Pos: pos, Field: fld, Msg: msg}
	}
	if e := w.track.Check(&op, pos); e != nil {
		return op, &ValidationError{Pos: pos, Field: e.Field, Msg: e.Msg}
	}
	line, err := op.AppendJSON(w.line[:0])
	if err != nil {
		return op, &ValidationError{Pos: pos, Field: "value", Msg: err.Error()}
	}
	line = append(line, '\n')
	w.line = line
	// Keep writes to the file whole lines, so that a kill between two of them leaves
	// no partial line behind.
	if w.bw.Buffered() > 0 && w.bw.Available() < len(line) {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("histories: writing %s: %w", w.f.Name(), err)
			return op, w.err
		}
	}
	if _, err := w.bw.Write(line); err != nil {
		w.err = fmt.Errorf("histories: writing %s: %w", w.f.Name(), err)
		return op, w.err
	}
	_, _ = w.track.Step(&op, pos) // Check passed above: it records the op
	w.next++
	w.dirty = true
	return op, nil
}

// Sync writes out and fsyncs every op appended so far.
func (w *Writer) Sync() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	err := w.flushLocked()
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.fsync()
}

// Close writes out and fsyncs every op appended, stops the background syncer and
// closes the file. Append, Sync and Close return ErrClosed afterwards.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	err := w.flushLocked()
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	if err == nil {
		err = w.fsync()
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("histories: closing %s: %w", w.f.Name(), cerr)
	}
	return err
}

// flushLocked writes the buffer out to the file; w.mu must be held.
func (w *Writer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	w.dirty = false
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("histories: writing %s: %w", w.f.Name(), err)
		return w.err
	}
	return nil
}

// fsync makes everything written to the file so far durable. It runs without w.mu so
// that appends go on meanwhile.
func (w *Writer) fsync() error {
	err := w.f.Sync()
	if err == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(err, os.ErrClosed) && w.closed {
		return nil // Close has synced everything.
	}
	if w.err == nil {
		w.err = fmt.Errorf("histories: syncing %s: %w", w.f.Name(), err)
	}
	return w.err
}

// syncer flushes and fsyncs what was appended, every syncEvery, until Close.
func (w *Writer) syncer() {
	defer close(w.done)
	tick := time.NewTicker(syncEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			w.mu.Lock()
			dirty := w.dirty && !w.closed
			var err error
			if dirty {
				err = w.flushLocked()
			}
			w.mu.Unlock()
			if dirty && err == nil {
				w.fsync() //nolint:errcheck // recorded in w.err, returned by the next call
			}
		}
	}
}
