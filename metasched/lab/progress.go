package lab

import (
	"fmt"
	"strings"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// CalibrationProgress says how far a calibration is, in one line: how
// many figures of keys (nil: all) are measured, what is
// measured now, what the others wait for, and how long is left at the
// pace of those measured since start. Pure: the view and the times come
// in.
func CalibrationProgress(c api.Calibration, keys []string, start time.Time) string {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var total, done, fresh, failed int
	var waiting []string
	for _, f := range c.Figures {
		if len(want) > 0 && !want[f.Key] {
			continue
		}
		total++
		switch {
		case f.State == api.CalibrationFailed:
			failed++
		case f.State == api.CalibrationMeasured:
			done++
			if !f.MeasuredAt.Before(start) {
				fresh++
			}
		case f.State == api.CalibrationDue:
			w := f.Key
			// The first one's reason only, and its gist: the line stays
			// one line; `metasched calibration` shows them all.
			if gist, _, _ := strings.Cut(f.Waiting, " ("); gist != "" && len(waiting) == 0 {
				w += " (" + gist + ")"
			}
			waiting = append(waiting, w)
		}
	}
	elapsed := c.At.Sub(start).Round(time.Second)
	if elapsed < 0 {
		elapsed = 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "calibration: %d of %d figures measured after %s", done, total, elapsed)
	if failed > 0 {
		fmt.Fprintf(&b, ", %d failed", failed)
	}
	if left := total - done - failed; left > 0 && fresh > 0 && elapsed > 0 {
		per := elapsed / time.Duration(fresh)
		fmt.Fprintf(&b, " (about %s left at this pace)", (per * time.Duration(left)).Round(10*time.Second))
	}
	if c.Measuring != "" && (len(want) == 0 || want[c.Measuring]) {
		fmt.Fprintf(&b, "; measuring %s", c.Measuring)
	}
	if len(waiting) > 0 {
		const shown = 3
		fmt.Fprintf(&b, "; %d waiting: %s", len(waiting), strings.Join(waiting[:min(shown, len(waiting))], ", "))
		if len(waiting) > shown {
			fmt.Fprintf(&b, " and %d more", len(waiting)-shown)
		}
	}
	return b.String()
}

// CalibrationState is what changes a calibration's progress line beyond
// its times: the figures' states and what they wait for. A line is
// printed when it changes, or after progressEvery.
func CalibrationState(c api.Calibration) string {
	var b strings.Builder
	b.WriteString(c.Measuring)
	for _, f := range c.Figures {
		b.WriteString("|" + f.Key + "=" + f.State + ":" + f.Waiting)
	}
	return b.String()
}

// progressEvery is how often a calibration's progress is printed when
// nothing changed.
const progressEvery = 30 * time.Second
