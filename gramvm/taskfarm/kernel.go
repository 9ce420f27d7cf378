package taskfarm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
)

// DigestSize is the size of a task's digest, the kernel's result.
const DigestSize = 32

// The kernel's constants: mixMul is the multiplier of the mixing step
// (2^64 divided by the golden ratio, odd), seeds the four lanes' starting
// values before the task's number is mixed in.
const (
	mixMul = 0x9e3779b97f4a7c15
	fmix1  = 0xff51afd7ed558ccd // MurmurHash3's finalizer
	fmix2  = 0xc4ceb9fe1a85ec53
)

var seeds = [4]uint64{0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1}

// fmix is MurmurHash3's 64-bit finalizer.
func fmix(x uint64) uint64 {
	x ^= x >> 33
	x *= fmix1
	x ^= x >> 33
	x *= fmix2
	x ^= x >> 33
	return x
}

// Kernel is the task farm's compute kernel on one task. Its state is
// four 64-bit lanes s[0..3], each started as fmix(seeds[i] ^ task·(i+1))
// (wrapping); the input is read as little-endian 64-bit words w[0..n-1],
// the last one padded with zero bytes (an empty input is one zero word).
// Operation k (k = 0, 1, ...) is one round of the mixing step
//
//	j = k mod 4
//	x = (s[j] xor w[k mod n]) · 0x9e3779b97f4a7c15      (mod 2^64)
//	s[j] = (x xor (x >> 29)) + s[(j+1) mod 4]           (mod 2^64)
//
// so an operation costs the same whatever the size of the input, and each
// depends on the ones before it. After the task's operations, the digest
// is the four lanes, each as fmix(s[i] xor ops), written little-endian:
// 32 bytes. Running the operations in several calls of Run gives the
// same digest as one call.
type Kernel struct {
	s     [4]uint64
	words []uint64
	idx   int    // the next word
	ops   uint64 // operations done
}

// NewKernel starts the kernel on a task's input.
func NewKernel(task uint64, input []byte) *Kernel {
	k := &Kernel{}
	for i := range k.s {
		k.s[i] = fmix(seeds[i] ^ task*uint64(i+1))
	}
	n := (len(input) + 7) / 8
	if n == 0 {
		n = 1
	}
	k.words = make([]uint64, n)
	for i := range n {
		var b [8]byte
		copy(b[:], input[min(8*i, len(input)):])
		k.words[i] = binary.LittleEndian.Uint64(b[:])
	}
	return k
}

// Ops is the number of operations done so far.
func (k *Kernel) Ops() uint64 { return k.ops }

// step is operation k.ops on lane j.
func (k *Kernel) step() {
	j := k.ops & 3
	x := (k.s[j] ^ k.words[k.idx]) * mixMul
	k.s[j] = (x ^ x>>29) + k.s[(j+1)&3]
	k.idx++
	if k.idx == len(k.words) {
		k.idx = 0
	}
	k.ops++
}

// Run performs n more operations.
func (k *Kernel) Run(n uint64) {
	for n > 0 && k.ops&3 != 0 {
		k.step()
		n--
	}
	s0, s1, s2, s3 := k.s[0], k.s[1], k.s[2], k.s[3]
	words, idx, last := k.words, k.idx, len(k.words)
	for blocks := n / 4; blocks > 0; blocks-- {
		x := (s0 ^ words[idx]) * mixMul
		s0 = (x ^ x>>29) + s1
		if idx++; idx == last {
			idx = 0
		}
		x = (s1 ^ words[idx]) * mixMul
		s1 = (x ^ x>>29) + s2
		if idx++; idx == last {
			idx = 0
		}
		x = (s2 ^ words[idx]) * mixMul
		s2 = (x ^ x>>29) + s3
		if idx++; idx == last {
			idx = 0
		}
		x = (s3 ^ words[idx]) * mixMul
		s3 = (x ^ x>>29) + s0
		if idx++; idx == last {
			idx = 0
		}
	}
	k.s = [4]uint64{s0, s1, s2, s3}
	k.idx = idx
	k.ops += n &^ 3
	for range n & 3 {
		k.step()
	}
}

// Digest is the digest of the operations done so far.
func (k *Kernel) Digest() [DigestSize]byte {
	var d [DigestSize]byte
	for i, s := range k.s {
		binary.LittleEndian.PutUint64(d[8*i:], fmix(s^k.ops))
	}
	return d
}

// Compute runs ops operations of the kernel on a task's input and
// returns its digest.
func Compute(task, ops uint64, input []byte) [DigestSize]byte {
	k := NewKernel(task, input)
	k.Run(ops)
	return k.Digest()
}

// Split is how a task's bytes exchanged with the master (the job's
// task_bytes, Comm) divide between the input the master sends and the
// result the worker sends back: the result is the digest's 32 bytes when
// taskBytes ≥ 64, else half of taskBytes (rounded down), and the input is
// the rest. Nearly all of Comm flows from the master to the workers.
func Split(taskBytes int64) (input, result int64) {
	if taskBytes >= 2*DigestSize {
		return taskBytes - DigestSize, DigestSize
	}
	return taskBytes - taskBytes/2, taskBytes / 2
}

// BenchInputBytes is the size of the input the bench runs the kernel on.
const BenchInputBytes = 4064

// benchChunk is the number of operations between two looks at the clock.
const benchChunk = 1 << 16

// BenchResult is what Bench measured (the JSON line of `taskfarm bench`).
type BenchResult struct {
	Procs               int     `json:"procs"`
	Seconds             float64 `json:"seconds"`
	Ops                 uint64  `json:"ops"`
	OpsPerSecond        float64 `json:"ops_per_second"`
	OpsPerSecondPerProc float64 `json:"ops_per_second_per_proc"`
}

// Bench runs the kernel on procs goroutines, each on its own task of
// BenchInputBytes, for about d, and reports the operations done and their
// rate: Seconds is the time from the start to the last goroutine's end.
// It returns ctx's error when ctx ends first.
func Bench(ctx context.Context, procs int, d time.Duration) (BenchResult, error) {
	if procs < 1 {
		return BenchResult{}, fmt.Errorf("bench: procs: %d, want at least 1", procs)
	}
	if d <= 0 {
		return BenchResult{}, fmt.Errorf("bench: duration: %v, want more than 0", d)
	}
	input := make([]byte, BenchInputBytes)
	for i := range input {
		input[i] = byte(i*131 + 7)
	}
	ops := make([]uint64, procs)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for p := range procs {
		wg.Go(func() {
			k := NewKernel(uint64(p), input)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				k.Run(benchChunk)
			}
			ops[p] = k.Ops()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return BenchResult{}, fmt.Errorf("bench: %w", err)
	}
	secs := time.Since(start).Seconds()
	var total uint64
	for _, n := range ops {
		var carry uint64
		total, carry = bits.Add64(total, n, 0)
		if carry != 0 {
			return BenchResult{}, errors.New("bench: the count of operations overflowed")
		}
	}
	return BenchResult{Procs: procs, Seconds: secs, Ops: total, OpsPerSecond: float64(total) / secs,
		OpsPerSecondPerProc: float64(total) / secs / float64(procs)}, nil
}
