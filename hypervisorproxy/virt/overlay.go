package virt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"libvirt.org/go/libvirt"

	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// Overlays. A VM of a disk image runs on its own copy-on-write overlay:
// a qcow2 volume whose backing file is the image's disk, made through
// libvirt's storage API in a "dir" pool on the overlay directory (a
// transient pool of this connection's daemon, named after the directory,
// made again when the daemon lost it), so that the daemon's own user
// owns it and QEMU can write it; it is deleted with the VM.

// overlayPoolPrefix starts the names of the overlay pools.
const overlayPoolPrefix = "metasched-overlays-"

// overlayName is the overlay volume of a VM, seedName its cloud-init
// seed (a raw ISO 9660 volume, in the same pool).
func overlayName(vm string) string { return vm + ".qcow2" }
func seedName(vm string) string    { return vm + ".cidata.iso" }

type xmlPool struct {
	XMLName xml.Name `xml:"pool"`
	Type    string   `xml:"type,attr"`
	Name    string   `xml:"name"`
	Path    string   `xml:"target>path"`
}

type xmlVolume struct {
	XMLName xml.Name `xml:"volume"`
	Type    string   `xml:"type,attr"`
	Name    string   `xml:"name"`
	Target  struct {
		Format struct {
			Type string `xml:"type,attr"`
		} `xml:"format"`
		Mode   string `xml:"permissions>mode"`
		Compat string `xml:"compat"`
	} `xml:"target"`
	Backing struct {
		Path   string `xml:"path"`
		Format struct {
			Type string `xml:"type,attr"`
		} `xml:"format"`
	} `xml:"backingStore"`
}

// overlayPool returns the active overlay pool on dir, making it (a
// transient dir pool) when the daemon has none; the caller frees it.
func (h *Host) overlayPool(conn *libvirt.Connect, dir string, build bool) (*libvirt.StoragePool, error) {
	return h.dirPool(conn, overlayPoolPrefix, dir, build)
}

// dirPool returns the active pool named prefix and a hash of dir, on dir,
// making it (a transient dir pool; with build, dir is made when missing)
// when the daemon has none; the caller frees it.
func (h *Host) dirPool(conn *libvirt.Connect, prefix, dir string, build bool) (*libvirt.StoragePool, error) {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	sum := sha256.Sum256([]byte(dir))
	name := prefix + hex.EncodeToString(sum[:6])
	if pool, err := conn.LookupStoragePoolByName(name); err == nil {
		if active, err := pool.IsActive(); err == nil && !active {
			if err := pool.Create(0); err != nil {
				pool.Free()
				return nil, wrap(err, "start the overlay pool %s on %s", name, h.uri)
			}
		}
		if err := pool.Refresh(0); err != nil {
			pool.Free()
			return nil, wrap(err, "refresh the overlay pool %s on %s", name, h.uri)
		}
		return pool, nil
	}
	x, err := xml.Marshal(xmlPool{Type: "dir", Name: name, Path: dir})
	if err != nil {
		return nil, fmt.Errorf("overlay pool: %w", err)
	}
	var flags libvirt.StoragePoolCreateFlags
	if build {
		flags = libvirt.STORAGE_POOL_CREATE_WITH_BUILD
	}
	pool, err := conn.StoragePoolCreateXML(string(x), flags)
	if err != nil {
		return nil, wrap(err, "make the overlay pool on %s of %s", dir, h.uri)
	}
	return pool, nil
}

// overlayPoolAt is the connection and the overlay pool on dir (the caller
// frees the pool).
func (h *Host) overlayPoolAt(ctx context.Context, dir string, build bool) (*libvirt.Connect, *libvirt.StoragePool, error) {
	conn, err := h.connection(ctx)
	if err != nil {
		return nil, nil, err
	}
	pool, err := h.overlayPool(conn, dir, build)
	if err != nil {
		return nil, nil, err
	}
	return conn, pool, nil
}

// createOverlay makes the overlay of VM name in dir, backed by base (a
// qcow2 file), and returns its path.
func (h *Host) createOverlay(ctx context.Context, dir, name, base string, build bool) (string, error) {
	_, pool, err := h.overlayPoolAt(ctx, dir, build)
	if err != nil {
		return "", err
	}
	defer pool.Free()
	v := xmlVolume{Type: "file", Name: overlayName(name)}
	v.Target.Format.Type = domxml.FormatQCOW2
	v.Target.Mode = "0600"
	v.Target.Compat = "1.1" // qcow2 version 3 (libvirt's default is 0.10, version 2)
	v.Backing.Path = base
	v.Backing.Format.Type = domxml.FormatQCOW2
	x, err := xml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("overlay of %s: %w", name, err)
	}
	vol, err := h.createVolume(pool, string(x), overlayName(name), "overlay", name, dir)
	if err != nil {
		return "", wrap(err, "make the overlay of %s on %s (backed by %s)", name, h.uri, base)
	}
	defer vol.Free()
	p, err := vol.GetPath()
	if err != nil {
		return "", wrap(err, "overlay of %s on %s", name, h.uri)
	}
	return p, nil
}

// createVolume makes the volume file (x, its XML) of a VM's in pool. One
// of that name already there was left by a VM of that name that is gone
// (the caller checked that no domain has it): a stale one, replaced.
func (h *Host) createVolume(pool *libvirt.StoragePool, x, file, what, vm, dir string) (*libvirt.StorageVol, error) {
	vol, err := pool.StorageVolCreateXML(x, 0)
	if code(err) != libvirt.ERR_STORAGE_VOL_EXIST {
		return vol, err
	}
	h.log.Warn().Str("vm", vm).Str("dir", dir).Msg("a stale " + what + " of the vm's name replaced")
	if old, lerr := pool.LookupStorageVolByName(file); lerr == nil {
		derr := old.Delete(0)
		old.Free()
		if derr != nil {
			return nil, wrap(derr, "delete the stale %s of %s on %s", what, vm, h.uri)
		}
	}
	return pool.StorageVolCreateXML(x, 0)
}

// createSeed makes the cloud-init seed of VM name in dir, with the bytes
// data, and returns its path. A seed left by a VM of that name that is
// gone is replaced.
func (h *Host) createSeed(ctx context.Context, dir, name string, data []byte, build bool) (string, error) {
	conn, pool, err := h.overlayPoolAt(ctx, dir, build)
	if err != nil {
		return "", err
	}
	defer pool.Free()
	x, err := xml.Marshal(xmlRawVolume{Type: "file", Name: seedName(name), Capacity: strconv.Itoa(len(data)), Mode: "0644"})
	if err != nil {
		return "", fmt.Errorf("seed of %s: %w", name, err)
	}
	vol, err := h.createVolume(pool, string(x), seedName(name), "seed", name, dir)
	if err != nil {
		return "", wrap(err, "make the seed of %s on %s", name, h.uri)
	}
	defer vol.Free()
	if err := upload(ctx, conn, vol, bytes.NewReader(data), int64(len(data))); err != nil {
		if derr := vol.Delete(0); derr != nil {
			err = errors.Join(err, wrap(derr, "delete the half-written seed of %s", name))
		}
		return "", fmt.Errorf("seed of %s on %s: %w", name, h.uri, err)
	}
	return volPath(vol)
}

// deleteOverlay deletes the overlay or the seed of VM name at path, when
// path is one (a volume named after the VM in an overlay pool); anything
// else is left alone. A pool the daemon lost (it restarted) is made again
// to find the volume.
func (h *Host) deleteOverlay(ctx context.Context, name, path string) error {
	base := filepath.Base(path)
	if path == "" || base != overlayName(name) && base != seedName(name) {
		return nil
	}
	conn, err := h.connection(ctx)
	if err != nil {
		return err
	}
	vol, err := conn.LookupStorageVolByPath(path)
	if err != nil {
		if code(err) != libvirt.ERR_NO_STORAGE_VOL {
			return wrap(err, "overlay %s of %s on %s", path, name, h.uri)
		}
		pool, perr := h.overlayPool(conn, filepath.Dir(path), false)
		if perr != nil {
			return perr
		}
		vol, err = pool.LookupStorageVolByName(base)
		pool.Free()
		if code(err) == libvirt.ERR_NO_STORAGE_VOL {
			return nil // already gone
		}
		if err != nil {
			return wrap(err, "overlay %s of %s on %s", path, name, h.uri)
		}
	}
	defer vol.Free()
	pool, err := vol.LookupPoolByVolume()
	if err != nil {
		return wrap(err, "overlay %s of %s on %s", path, name, h.uri)
	}
	poolName, err := pool.GetName()
	pool.Free()
	if err != nil || !strings.HasPrefix(poolName, overlayPoolPrefix) {
		return nil // not an overlay of ours
	}
	if err := vol.Delete(0); err != nil && code(err) != libvirt.ERR_NO_STORAGE_VOL {
		return wrap(err, "delete the overlay %s of %s on %s", path, name, h.uri)
	}
	return nil
}

// disksOf are the disk files of a domain (its overlay and its seed, for a
// VM of a disk image), or none.
func disksOf(dom *libvirt.Domain) []string {
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		return nil
	}
	d, err := domxml.Parse(x)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range []string{d.Disk, d.Seed} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
