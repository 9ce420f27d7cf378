package executor

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// sshKeyName is an attempt's ssh key, in its attempt directory.
const sshKeyName = "ssh-key"

// SSHKey is the ssh key pair of a job's attempt: the VMs of a cloud image
// authorize it for their job user, and each holds it, so that the master
// reaches every worker (mpirun's ssh) and nobody else does.
type SSHKey struct {
	Private    []byte // OpenSSH private key (PEM), for the job user's ~/.ssh/id_ed25519
	Authorized string // its public key as an authorized_keys line
}

// AttemptSSHKey returns the ssh key of attempt attempt of the job whose
// run directory is dir, making it (Ed25519) the first time: it is kept in
// the attempt's directory (mode 0600, the daemon's only), so that the
// VMs made for the attempt and the executor that contextualizes them use
// the same key, also across a restart.
func AttemptSSHKey(dir string, attempt int, jobID string) (SSHKey, error) {
	adir := AttemptDir(dir, attempt)
	file := filepath.Join(adir, sshKeyName)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if data, err = newSSHKey(adir, file, fmt.Sprintf("metasched job %s attempt %d", jobID, attempt)); err != nil {
			return SSHKey{}, fmt.Errorf("job %s: ssh key: %w", jobID, err)
		}
	} else if err != nil {
		return SSHKey{}, fmt.Errorf("job %s: ssh key: %w", jobID, err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return SSHKey{}, fmt.Errorf("job %s: ssh key %s: %w", jobID, file, err)
	}
	auth := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	return SSHKey{Private: data, Authorized: auth + " metasched-job-" + jobID}, nil
}

// newSSHKey makes an Ed25519 key and writes it to file, in a new file
// that appears whole (a temporary file renamed over nothing: a key made
// by another call meanwhile wins).
func newSSHKey(dir, file, comment string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(block)
	tmp, err := os.CreateTemp(dir, "."+sshKeyName+"-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// A link fails when the file exists: the first key made is the key.
	if err := os.Link(tmp.Name(), file); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return os.ReadFile(file)
		}
		return nil, err
	}
	return data, nil
}
