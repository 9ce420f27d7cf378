package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is a process of the lab: the metasched binary run as an agent or
// as the daemon, its stdout and stderr in Log.
type Proc struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}

	addr chan string // serve: the address it prints first
}

// run starts the binary in the lab's directory.
func (l *Lab) run(name string, args ...string) (*Proc, error) {
	l.mu.Lock()
	n := len(l.procs)
	l.mu.Unlock()
	p := &Proc{Name: name, Log: filepath.Join(l.opt.Dir, fmt.Sprintf("%s-%d.log", name, n)), done: make(chan struct{}),
		addr: make(chan string, 1)}
	f, err := os.Create(p.Log)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	p.cmd = exec.Command(l.opt.Binary, args...)
	p.cmd.Dir = l.opt.Dir
	p.cmd.Stderr = f
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lab: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("lab: start %s: %w", name, err)
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	go func() {
		WatchServe(stdout, f, p.addr)
		_ = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// WatchServe copies the lines a process prints (r, its stdout) to w and
// sends the address `metasched serve` prints first ("metasched daemon on
// ADDR ...") on addr, if addr has room; the rest of a line too long for
// the scanner is copied as it is. It returns at the end of r.
func WatchServe(r io.Reader, w io.Writer, addr chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if rest, ok := strings.CutPrefix(line, "metasched daemon on "); ok {
			a, _, _ := strings.Cut(rest, " ")
			select {
			case addr <- a:
			default:
			}
		}
	}
	_, _ = io.Copy(w, r)
}

// waitAddress waits for the address a daemon prints when it serves.
func (p *Proc) waitAddress(ctx context.Context) (string, error) {
	select {
	case a := <-p.addr:
		return a, nil
	case <-p.done:
		return "", fmt.Errorf("lab: %s exited before serving (%v); its log ends:\n%s", p.Name, p.State(), p.Tail())
	case <-ctx.Done():
		return "", fmt.Errorf("lab: %s printed no address: %w", p.Name, ctx.Err())
	}
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// PID is the process's ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// State is the process's exit state, nil while it runs.
func (p *Proc) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Kill sends SIGKILL (by PID: the lab's own child) and waits for the end.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits at most grace for the end, then SIGKILL.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("lab: %s did not stop in %s after SIGTERM: killed", p.Name, grace)
	}
}

// Tail is the end of the process's log.
func (p *Proc) Tail() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	if len(b) > 12000 {
		b = b[len(b)-12000:]
	}
	return string(b)
}
