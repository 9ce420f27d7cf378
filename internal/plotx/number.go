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

// PlainAll writes values in Plain's format with as many decimals each as
// the one that needs the most (2.6, 2.8, 3.0), as the labels of one axis
// or column.
func PlainAll(values []float64) []string {
	decimals := 0
	for _, v := range values {
		s := strconv.FormatFloat(sigRound(v, 12), 'f', -1, 64)
		if _, frac, ok := strings.Cut(s, "."); ok {
			decimals = max(decimals, len(frac))
		}
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = Plain(math.Round(v*math.Pow10(decimals)) / math.Pow10(decimals))
		if decimals > 0 {
			whole, frac, _ := strings.Cut(out[i], ".")
			out[i] = whole + "." + frac + strings.Repeat("0", decimals-len(frac))
		}
	}
	return out
}
