package plotx

import (
	"math"
	"strconv"
	"strings"
)

// Plain writes v in plain decimal notation, never with an exponent, with
// its thousands grouped by commas: 0.25, 10, 1,000, 2,500,000. It is the
// one format of the figures' tick labels and of the tables' numbers.
func Plain(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	b.WriteString(sign)
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}

// Sig writes v rounded to digits significant digits, in Plain's format:
// Sig(14840.73, 4) = "14,840", Sig(0.0123456, 2) = "0.012".
func Sig(v float64, digits int) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return Plain(v)
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'e', max(digits, 1)-1, 64), 64)
	if err != nil {
		return Plain(v)
	}
	return Plain(r)
}
