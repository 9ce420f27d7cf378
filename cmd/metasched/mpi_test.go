package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lab"
)

var (
	mpiHosts  = flag.Int("mpi-hosts", 2, "TestMPIGrid: hosts per site, one VM of the MPI job on each (make soak: 3)")
	mpiRounds = flag.Int("mpi-rounds", 30, "TestMPIGrid: the MPI program's rounds, a second apart (make soak: 90)")
)

// mpiGridSites are the MPI grid's sites: a and b of hosts hosts each,
// joined by a 20 Mbit/s link, every host with its own image_dir (no
// storage shared between hosts); the pool mpi boots the Debian image
// (metasched image build --kind debian: cloud-init, OpenMPI) with 1 vCPU
// and 512 MiB per VM.
func mpiGridSites(hosts int) []lab.Site {
	return []lab.Site{
		{Name: "a", Hosts: hosts, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024},
		{Name: "b", Hosts: hosts, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024},
	}
}

// A real MPI job across two sites, on a standard cloud image: the daemon
// plans examples/job-mpi-guests.yaml on the four hosts, the agents boot
// four VMs of the Debian image, which cloud-init contextualizes (host
// name, address, the job user and the attempt's ssh key), and the master
// runs mpirun over ssh. While it runs, a worker VM moves live to the other
// host of its site, which shares no storage with the first: its disk is
// copied, the daemon follows it, and the job goes on. Every rank prints
// its host, the master the right result, and nothing is left.
func TestMPIGrid(t *testing.T) {
	if err := lab.Check(); err != nil {
		t.Fatal(err)
	}
	bin, dir := buildBinary(t), t.TempDir()
	sites, vms := mpiGridSites(*mpiHosts), 2**mpiHosts
	built := time.Now()
	res, err := image.Build(context.Background(), image.Options{Kind: image.BuildDebian, TaskFarm: buildTaskFarm(t, t.TempDir())})
	if err != nil {
		t.Fatalf("the Debian image: %v", err)
	}
	t.Logf("Debian image (kernel %s, %d packages): cached %v, %.0f s", res.Image.KernelRelease, len(res.Image.Inputs), res.Cached, time.Since(built).Seconds())
	spec := lab.Spec{
		Sites:         sites,
		Pools:         []lab.Pool{{Name: "mpi", VCPUs: 1, MemoryMiB: 512, Image: "debian"}},
		Images:        map[string]string{"debian": res.Dir},
		HostImageDirs: true,
		// Every host runs on this machine's two cores: one boot at a time
		// per site (two at once in all) is twice as fast as four at once.
		BootTimeout:        15 * time.Minute,
		MaxConcurrentBoots: 1,
		Serve:              "calibration: {auto: false}\n",
	}
	l := lab.StartT(t, spec, lab.Options{Binary: bin, Dir: dir})
	g := &guestGrid{t: t, lab: l, dir: l.Dir(), c: l.Client}

	data, err := os.ReadFile(example + "job-mpi-guests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Rounds enough to outlast the migration.
	rounds := *mpiRounds
	job := strings.Replace(string(data), "exec mpirun --hostfile \"$METASCHED_HOSTFILE\" --mca btl tcp,self --mca pml ob1 mpi-pi 2000000 5",
		fmt.Sprintf("mpirun --hostfile \"$METASCHED_HOSTFILE\" --mca btl tcp,self --mca pml ob1 mpi-pi 2000000 %d; s=$?; echo \"mpirun exit $s\"; exit $s", rounds), 1)
	if job == string(data) {
		t.Fatal("the example's mpirun line changed: the test cannot lengthen it")
	}
	start := time.Now()
	j := g.submit(job)
	g.waitState(j.ID, 20*time.Minute, api.Running)
	t.Logf("running after %.0f s", time.Since(start).Seconds())
	g.bootFigures()

	// The job runs: its first rounds are in its log.
	g.eventually(10*time.Minute, "the first round in the log", func(context.Context) (string, bool) {
		log := g.jobLog(j.ID)
		return lastLines(log, 5), strings.Contains(log, fmt.Sprintf("round 2 of %d", rounds))
	})
	j = g.waitState(j.ID, time.Minute, api.Running)
	if on := vmSites(j); len(j.VMs) != vms || len(on) != 2 {
		t.Fatalf("the job's VMs %+v: want %d on both sites", j.VMs, vms)
	}
	i := slices.IndexFunc(j.VMs, func(v api.JobVM) bool { return !v.Master && v.Site == "a" })
	if i < 0 {
		t.Fatalf("no worker VM on site a: %+v", j.VMs)
	}
	mover := j.VMs[i]
	to := ""
	for n := 1; n <= *mpiHosts && to == ""; n++ {
		if h := fmt.Sprintf("a-%d", n); h != mover.Host {
			to = h
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	m, err := l.Agents["a"].Client.Migrate(ctx, mover.Name, to)
	cancel()
	if err != nil {
		t.Fatalf("migrate %s: %v", mover.Name, err)
	}
	t.Logf("migrated %s from %s to %s while the job ran: %.1f s, downtime %.0f ms, %.0f MiB moved, its disk copied: %v",
		mover.Name, m.From, m.To, m.Seconds, m.DowntimeMs, m.DataMiB, m.Disk)
	if !m.Live || !m.Disk {
		t.Errorf("migration %+v: want live, with its disk", m)
	}
	if log := g.jobLog(j.ID); strings.Contains(log, fmt.Sprintf("round %d of %d", rounds, rounds)) {
		t.Errorf("the job ended before the migration did: the test shows nothing of a job going on through it")
	}
	// The daemon follows the VM.
	g.eventually(time.Minute, "the daemon sees "+mover.Name+" on "+to, func(ctx context.Context) (string, bool) {
		jj, err := g.job(ctx, j.ID)
		if err != nil {
			return err.Error(), false
		}
		for _, v := range jj.VMs {
			if v.Name == mover.Name {
				return v.Host, v.Host == to
			}
		}
		return "gone", false
	})

	j = g.waitState(j.ID, 10*time.Minute, api.Done, api.Failed)
	log := g.jobLog(j.ID)
	if j.State != api.Done {
		t.Fatalf("job %s: %s (%s); log:\n%s", j.ID, j.State, j.Reason, log)
	}
	t.Logf("done in %.0f s from its submission; log (end):\n%s", time.Since(start).Seconds(), lastLines(log, 8))
	for _, v := range j.VMs {
		if !regexp.MustCompile(fmt.Sprintf(`rank [0-9]+ of %d on %s\b`, vms, regexp.QuoteMeta(v.Name))).MatchString(log) {
			t.Errorf("no rank ran on %s:\n%s", v.Name, log)
		}
	}
	res90 := regexp.MustCompile(fmt.Sprintf(`\| pi = 3\.14159265358[0-9]* \(error [0-9.e+-]+\) from %d ranks on %d hosts, 2000000 intervals`, vms, vms))
	if !res90.MatchString(log) || !strings.Contains(log, fmt.Sprintf("round %d of %d: pi = 3.14159265", rounds, rounds)) || !strings.Contains(log, "mpirun exit 0") {
		t.Errorf("the master's result is not in the log:\n%s", log)
	}
	g.nothingLeft()
	for _, s := range sites {
		for n := 1; n <= s.Hosts; n++ {
			left, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("images-%s-%d", s.Name, n), "overlays", "*"))
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("left on host %s-%d: %v", s.Name, n, left)
			}
		}
	}
}

// vmSites are the sites of a job's VMs.
func vmSites(j api.Job) map[string]bool {
	out := map[string]bool{}
	for _, v := range j.VMs {
		out[v.Site] = true
	}
	return out
}

// lastLines are the last n lines of a log.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// bootFigures logs the seconds from each VM's create to its guest agent's
// answer and to its readiness (cloud-init done), from the inventories.
func (g *guestGrid) bootFigures() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range g.lab.Agents {
		inv, err := a.Client.Inventory(ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, h := range inv.Hosts {
			for _, v := range h.VMs {
				g.t.Logf("vm %s on %s: guest agent after %.1f s, ready (cloud-init done) after %.1f s, job user %q",
					v.Name, h.Name, v.AgentSeconds, v.BootSeconds, v.User)
				if v.User == "" || v.AgentSeconds <= 0 || v.BootSeconds < v.AgentSeconds {
					g.t.Errorf("vm %s: the inventory says %+v", v.Name, v)
				}
			}
		}
	}
}
