package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// The event stream. Each page gets one "state" event at once, with the
// charts' history, built for it alone; after that a broadcast builds the
// state (without the history) once every api.EventEvery and hands the same
// event to every page. The broadcast runs while at least one page
// watches. A page that reads slowly gets the newest state, not a queue of
// old ones.

// subscriber is one event stream being served: c holds the newest event
// it has not sent yet, and is closed when the state can no longer be
// built. It gets the states of the builds after the first after, so never
// one older than its first.
type subscriber struct {
	c     chan []byte
	after uint64
	// ctx carries the page's principal: what it may see (ViewFor).
	ctx context.Context
}

// ServeEvents streams the dashboard's state as server-sent events: one
// "state" event at once (with the history) and then one every
// api.EventEvery, until the client goes or the daemon stops. The browser's
// EventSource reconnects by itself after retry milliseconds.
func (b *Board) ServeEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", api.EventEvery.Milliseconds()); err != nil {
		return
	}
	send := func(data []byte) bool {
		if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	first, err := b.event(r.Context(), true)
	if err != nil || !send(first) {
		return // the store is closing: the client reconnects
	}
	s := b.subscribe(r.Context())
	defer b.unsubscribe(s)
	for {
		select {
		case <-r.Context().Done():
			return
		case data, ok := <-s.c:
			if !ok || !send(data) {
				return
			}
		}
	}
}

// event is the state, as the principal of ctx may see it, as the data of
// an event.
func (b *Board) event(ctx context.Context, withHistory bool) ([]byte, error) {
	db, err := b.State(ctx, withHistory)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ViewFor(ctx, db))
}

// subscribe adds an event stream, and starts the broadcast for the first.
func (b *Board) subscribe(ctx context.Context) *subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &subscriber{c: make(chan []byte, 1), after: b.builds, ctx: ctx}
	b.subs[s] = struct{}{}
	if b.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		b.stop = cancel
		go b.broadcast(ctx)
	}
	return s
}

// unsubscribe removes an event stream, and stops the broadcast after the
// last.
func (b *Board) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; !ok {
		return
	}
	delete(b.subs, s)
	if len(b.subs) == 0 && b.stop != nil {
		b.stop()
		b.stop = nil
	}
}

// broadcast builds the state every api.EventEvery and hands it to every
// subscriber, until ctx ends. When the state cannot be built (the daemon
// is closing) it ends every stream: the pages reconnect.
func (b *Board) broadcast(ctx context.Context) {
	t := time.NewTicker(api.EventEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		b.builds++
		n := b.builds
		b.mu.Unlock()
		db, err := b.State(ctx, false)
		b.mu.Lock()
		if ctx.Err() != nil { // stopped meanwhile: another broadcast may run
			b.mu.Unlock()
			return
		}
		if err != nil {
			for s := range b.subs {
				close(s.c)
				delete(b.subs, s)
			}
			b.stop()
			b.stop = nil
			b.mu.Unlock()
			return
		}
		views := map[api.Principal][]byte{} // one encoding per viewer
		for s := range b.subs {
			if n <= s.after {
				continue // built before s's first state
			}
			view := ViewFor(s.ctx, db)
			data, ok := views[view.Viewer]
			if !ok {
				data, _ = json.Marshal(view) // a state always encodes
				views[view.Viewer] = data
			}
			select {
			case <-s.c: // not sent yet: the newer state replaces it
			default:
			}
			s.c <- data
		}
		b.mu.Unlock()
	}
}
