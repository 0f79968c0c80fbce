package zlcmutex

import (
	"errors"
	"fmt"
)

// Read returns the counter: CounterPath's data as a decimal integer; a missing or
// empty node is 0. Reads change nothing, so every error is definite.
func (l *Lock) Read() (int64, error) {
	if l.cfg.CounterPath == "" {
		return 0, definite(ErrNoCounter)
	}
	data, _, err := l.cfg.Client.Get(l.cfg.CounterPath)
	switch {
	case errors.Is(err, ErrNoNode):
		return 0, nil
	case err != nil:
		return 0, definite(fmt.Errorf("read %s: %w", l.cfg.CounterPath, err))
	}
	v, err := ParseCounter(data)
	if err != nil {
		return 0, definite(fmt.Errorf("read %s: %w", l.cfg.CounterPath, err))
	}
	return v, nil
}

// Write stores v in the counter. Unfenced, it is a plain set; fenced (Config.Fenced),
// a multi of a check that the lock node still exists and the set, which fails with
// ErrFenced, writing nothing, when the node is gone (and then ends the hold as lost).
// A missing counter node is created empty (which reads as 0) and the write retried.
func (l *Lock) Write(v int64) error {
	if l.cfg.CounterPath == "" {
		return definite(ErrNoCounter)
	}
	data := FormatCounter(v)
	var node string
	if l.cfg.Fenced {
		l.mu.Lock()
		node = l.node
		l.mu.Unlock()
		if node == "" {
			return definite(ErrFenced)
		}
	}
	for attempt := 0; ; attempt++ {
		var err error
		if l.cfg.Fenced {
			err = l.cfg.Client.Multi(CheckOp(node, -1), SetOp(l.cfg.CounterPath, data, -1))
		} else {
			_, err = l.cfg.Client.Set(l.cfg.CounterPath, data, -1)
		}
		var me *MultiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &me) && me.Index == 0 && errors.Is(me.Err, ErrNoNode):
			l.fenceLost(node)
			return definite(ErrFenced)
		case errors.Is(err, ErrNoNode) && attempt < 2:
			// The counter node does not exist yet.
			if cerr := createAll(l.cfg.Client, l.cfg.CounterPath, nil); cerr != nil {
				return definite(fmt.Errorf("write: creating %s: %w", l.cfg.CounterPath, cerr))
			}
		case definiteClientError(err):
			return definite(fmt.Errorf("write %s: %w", l.cfg.CounterPath, err))
		default:
			return fmt.Errorf("write %s: %w", l.cfg.CounterPath, err)
		}
	}
}

// fenceLost ends the hold of node, which a fenced write found gone, as lost.
func (l *Lock) fenceLost(node string) {
	if l.cfg.Mutant == MutantIgnoreLost {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == node && !l.lost {
		l.lost = true
		l.cfg.Logf("lost %s: a fenced write found it gone", node)
		l.cfg.OnLost("lock node gone")
	}
}
