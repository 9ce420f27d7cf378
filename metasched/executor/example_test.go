package executor_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

func ExampleEmulated() {
	ex := executor.NewEmulated(zerolog.Nop())
	res, err := ex.Run(context.Background(), executor.Run{
		JobID: "j-000000000042",
		Job:   &selection.Job{Name: "render-42", Tasks: 300},
		VMs: []executor.VM{
			{Name: "render-42-0", Site: "spain", Host: "spain-1", Master: true, VCPUs: 2},
			{Name: "render-42-1", Site: "spain", Host: "spain-2", VCPUs: 2},
			{Name: "render-42-2", Site: "latam-a", Host: "latam-a-1", VCPUs: 2},
		},
		Predicted: 50 * time.Millisecond, // 50 s of the plan at time_scale 0.001
		Output:    os.Stdout,
	})
	fmt.Println(res.ExitCode, err)
	// Output:
	// emulating job render-42 (id j-000000000042): master VM render-42-0 on host spain-1 (site spain)
	// workers: 1 VM on spain, 1 VM on latam-a
	// predicted run time 0.05 s, 0 s already run, 0.05 s to go
	// emulated run finished
	// 0 <nil>
}

func ExampleCommand() {
	dir, err := os.MkdirTemp("", "metasched-run-")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Removing a temporary directory is best effort.
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the job's user reads its hostfile there
		fmt.Println(err)
		return
	}

	// A daemon that runs as root runs the commands as an unprivileged
	// user; one that runs as another user, as itself.
	runAs := ""
	if os.Geteuid() == 0 {
		runAs = "nobody"
	}
	ex, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{Grace: 5 * time.Second, RunAs: runAs})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := ex.Run(context.Background(), executor.Run{
		JobID: "j-000000000042",
		Job: &selection.Job{Name: "render-42", Tasks: 300, Command: []string{
			"sh", "-c", `echo "$METASCHED_JOB_NAME: $METASCHED_TASKS tasks on"; cat "$METASCHED_HOSTFILE"; exit 3`,
		}},
		VMs: []executor.VM{
			{Name: "render-42-0", Site: "spain", Host: "spain-1", Master: true, VCPUs: 2},
			{Name: "render-42-1", Site: "latam-a", Host: "latam-a-1", VCPUs: 4},
		},
		Dir:    dir,
		Output: os.Stdout,
	})
	fmt.Printf("%+v %v\n", res, err)
	// Output:
	// render-42: 300 tasks on
	// render-42-0 slots=2 # site=spain host=spain-1 role=master
	// render-42-1 slots=4 # site=latam-a host=latam-a-1 role=worker
	// {ExitCode:3 Reason:exit status 3} <nil>
}
