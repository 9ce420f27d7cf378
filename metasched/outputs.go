package metasched

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// outputsDir is the directory of the outputs of the last attempt of the
// finished job id, and the job: 404 for no job, 409 for a job not
// finished or never started, 404 when the run directory was removed
// (retention.job_dirs).
func (d *Daemon) outputsDir(ctx context.Context, id string) (string, api.Job, error) {
	j, err := d.Job(ctx, id)
	if err != nil {
		return "", j, err
	}
	if !j.State.Terminal() {
		return "", j, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("job %s is %s: its outputs are copied out of the master VM when it ends", id, j.State)}
	}
	if j.Attempts == 0 {
		return "", j, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("job %s ended (%s) without running: it has no outputs", id, j.State)}
	}
	dir := filepath.Join(d.cfg.DataDir, "jobs", id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", j, &api.RequestError{Status: 404, Code: api.CodeNotFound,
			Msg: fmt.Sprintf("the outputs of job %s are gone: its run directory was removed %s after it ended (retention.job_dirs)", id, d.retention().JobDirs)}
	} else if err != nil {
		return "", j, fmt.Errorf("job %s: %w", id, err)
	}
	return executor.OutputsDir(dir, j.Attempts), j, nil
}

// Outputs lists the output files of a finished job's last attempt.
func (d *Daemon) Outputs(ctx context.Context, id string) (_ api.OutputList, err error) {
	defer apiError(&err)
	odir, j, err := d.outputsDir(ctx, id)
	if err != nil {
		return api.OutputList{}, err
	}
	out := api.OutputList{Job: id, Attempt: j.Attempts, Files: []api.OutputFile{}}
	err = filepath.WalkDir(odir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && p == odir {
				return filepath.SkipDir // no output copied
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(odir, p)
		if err != nil {
			return err
		}
		out.Files = append(out.Files, api.OutputFile{Name: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		return api.OutputList{}, fmt.Errorf("job %s: list the outputs: %w", id, err)
	}
	slices.SortFunc(out.Files, func(a, b api.OutputFile) int { return strings.Compare(a.Name, b.Name) })
	for _, name := range j.Spec.Outputs {
		if !slices.ContainsFunc(out.Files, func(f api.OutputFile) bool { return f.Name == name }) {
			out.Missing = append(out.Missing, name)
		}
	}
	return out, nil
}

// Output opens the output file name (a path the job file's outputs give)
// of a finished job's last attempt; the caller closes it. A name that is
// not a clean relative path is refused (400), one that was not copied is
// 404; the file is opened inside the outputs directory, so that nothing
// (a symbolic link included) reads outside it.
func (d *Daemon) Output(ctx context.Context, id, name string) (_ *os.File, err error) {
	defer apiError(&err)
	if why := selection.CheckJobFilePath(name); why != "" || !filepath.IsLocal(filepath.FromSlash(name)) {
		if why == "" {
			why = fmt.Sprintf("must be a local path, got %q", name)
		}
		return nil, invalidField("name", why)
	}
	odir, j, err := d.outputsDir(ctx, id)
	if err != nil {
		return nil, err
	}
	notFound := &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("job %s: no output %q in attempt %d", id, name, j.Attempts)}
	root, err := os.OpenRoot(odir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, notFound
	} else if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, notFound
		}
		return nil, invalidField("name", err.Error())
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, notFound
	}
	return f, nil
}
