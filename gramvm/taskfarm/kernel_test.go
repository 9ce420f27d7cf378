package taskfarm

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"
)

// refDigest is the kernel as the documentation writes it, one operation
// at a time, without the unrolled loop of Kernel.Run.
func refDigest(task, ops uint64, input []byte) [DigestSize]byte {
	var s [4]uint64
	for i := range s {
		s[i] = fmix(seeds[i] ^ task*uint64(i+1))
	}
	var w []uint64
	for i := 0; i < len(input); i += 8 {
		var b [8]byte
		copy(b[:], input[i:])
		w = append(w, binary.LittleEndian.Uint64(b[:]))
	}
	if len(w) == 0 {
		w = []uint64{0}
	}
	for k := range ops {
		j := k % 4
		x := (s[j] ^ w[k%uint64(len(w))]) * 0x9e3779b97f4a7c15
		s[j] = (x ^ (x >> 29)) + s[(j+1)%4]
	}
	var d [DigestSize]byte
	for i := range s {
		binary.LittleEndian.PutUint64(d[8*i:], fmix(s[i]^ops))
	}
	return d
}

// The kernel computes what its documentation says, in one call or in
// chunks of any size, for inputs of every length modulo 8 and counts of
// operations of every residue modulo 4.
func TestKernel(t *testing.T) {
	for _, size := range []int{0, 1, 7, 8, 9, 31, 64, 4064} {
		input := make([]byte, size)
		for i := range input {
			input[i] = byte(i*37 + size)
		}
		for _, ops := range []uint64{1, 2, 3, 4, 5, 63, 1000, 4097} {
			want := refDigest(42, ops, input)
			if got := Compute(42, ops, input); got != want {
				t.Errorf("size %d, ops %d: Compute = %x, want %x", size, ops, got, want)
			}
			for _, chunk := range []uint64{1, 3, 4, 13} {
				k := NewKernel(42, input)
				for k.Ops() < ops {
					k.Run(min(chunk, ops-k.Ops()))
				}
				if got := k.Digest(); got != want {
					t.Errorf("size %d, ops %d, chunks of %d: %x, want %x", size, ops, chunk, got, want)
				}
			}
		}
	}
	in := []byte("the same input")
	if Compute(1, 100, in) == Compute(2, 100, in) {
		t.Error("two tasks with the same input have the same digest")
	}
	if Compute(1, 100, in) == Compute(1, 101, in) {
		t.Error("one operation more gives the same digest")
	}
	if Compute(1, 100, in) == Compute(1, 100, []byte("the same inpuT")) {
		t.Error("another input gives the same digest")
	}
}

// The split of a task's bytes: the digest's 32 bytes back from 64 up,
// half below, the input the rest.
func TestSplit(t *testing.T) {
	for _, c := range []struct{ bytes, input, result int64 }{
		{0, 0, 0}, {1, 1, 0}, {2, 1, 1}, {3, 2, 1}, {63, 32, 31}, {64, 32, 32}, {65, 33, 32}, {4096, 4064, 32}, {5e7, 5e7 - 32, 32},
	} {
		in, res := Split(c.bytes)
		if in != c.input || res != c.result {
			t.Errorf("Split(%d) = %d, %d; want %d, %d", c.bytes, in, res, c.input, c.result)
		}
	}
}

// The bench runs the kernel on its processes and reports a rate that
// adds up; its JSON line has the fields the calibration reads.
func TestBench(t *testing.T) {
	r, err := Bench(t.Context(), 2, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Procs != 2 || r.Ops == 0 || r.Seconds < 0.05 || r.OpsPerSecond <= 0 {
		t.Fatalf("bench %+v", r)
	}
	if d := r.OpsPerSecond - float64(r.Ops)/r.Seconds; d > 1e-6*r.OpsPerSecond || d < -1e-6*r.OpsPerSecond {
		t.Errorf("ops_per_second %g, but ops/seconds = %g", r.OpsPerSecond, float64(r.Ops)/r.Seconds)
	}
	if d := r.OpsPerSecondPerProc*2 - r.OpsPerSecond; d > 1e-6*r.OpsPerSecond || d < -1e-6*r.OpsPerSecond {
		t.Errorf("ops_per_second_per_proc %g, ops_per_second %g", r.OpsPerSecondPerProc, r.OpsPerSecond)
	}
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]float64
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"procs", "seconds", "ops", "ops_per_second", "ops_per_second_per_proc"} {
		if _, ok := back[k]; !ok || len(back) != 5 {
			t.Errorf("bench line %s lacks %s or has others", line, k)
		}
	}
	if _, err := Bench(t.Context(), 0, time.Second); err == nil {
		t.Error("bench with 0 procs")
	}
	if _, err := Bench(t.Context(), 1, 0); err == nil {
		t.Error("bench of 0 s")
	}
}

// BenchmarkKernel is the kernel's rate on one goroutine (ops/s), on the
// bench's input.
func BenchmarkKernel(b *testing.B) {
	input := make([]byte, BenchInputBytes)
	k := NewKernel(1, input)
	const chunk = 1 << 16
	start := time.Now()
	for b.Loop() {
		k.Run(chunk)
	}
	b.ReportMetric(float64(k.Ops())/time.Since(start).Seconds(), "ops/s")
}
