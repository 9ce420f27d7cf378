package plotx

import "testing"

func TestPlainAndSig(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.25, "0.25"}, {10, "10"}, {999, "999"}, {1000, "1,000"}, {100000, "100,000"},
		{1e6, "1,000,000"}, {2.5e6, "2,500,000"}, {-12345.5, "-12,345.5"}, {1e-4, "0.0001"},
	} {
		if got := Plain(tc.v); got != tc.want {
			t.Errorf("Plain(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v      float64
		digits int
		want   string
	}{
		{14840.73006, 4, "14,840"}, {10.78274413, 4, "10.78"}, {0.0123456, 2, "0.012"}, {226304.4222, 4, "226,300"},
		{3400.2, 2, "3,400"}, {0, 3, "0"}, {0.33, 2, "0.33"}, {52000, 2, "52,000"},
	} {
		if got := Sig(tc.v, tc.digits); got != tc.want {
			t.Errorf("Sig(%g, %d) = %q, want %q", tc.v, tc.digits, got, tc.want)
		}
	}
}
